// A shared library that does nothing, preloaded where libgpulimit.so would
// be: the CLI's tests check what gpulimit hands the job, not the interposer.
extern "C" int gpulimit_preload_stand_in() {
  return 0;
}
