/* Preloaded into the sanitizer build's tests (CMakeLists.txt, AH_SANITIZE): dlclose does
 * nothing. Open MPI unloads its plugins at MPI_Finalize; LeakSanitizer runs later, at exit, and
 * then cannot name the plugin that made an allocation, so tests/lsan.supp could not suppress
 * Open MPI's deliberate at-exit leaks without also turning leak checking off for our code. */
int dlclose(void *handle);

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
