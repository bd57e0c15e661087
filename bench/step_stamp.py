# Stamps each new line of a file as it is written (bench/sim_ckpt_hold.sh, bench/ckpt_keep_hold.sh):
#   python3 bench/step_stamp.py SRC OUT STOP   each new line of SRC with its time.monotonic(), into OUT, until STOP exists
import os, sys, time
src, out, stop = sys.argv[1:4]
buf, pos = b"", 0
with open(out, "w") as o:
    while True:
        done = os.path.exists(stop)
        if os.path.exists(src):
            with open(src, "rb") as f:
                f.seek(pos)
                more = f.read()
            now = time.monotonic()
            pos += len(more)
            buf += more
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                o.write(f"{now:.6f} {line.decode()}\n")
        if done:
            break
        time.sleep(0.002)
