// Found only along runpath_loader's RUNPATH.
extern "C" __attribute__((visibility("default"))) int runpath_dependency_answer() {
  return 42;
}
