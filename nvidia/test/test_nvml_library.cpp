// The one NVML loader: every function of the list found in a complete
// library, a missing one left null with the others usable, the process's own
// copy preferred, one load however many threads ask first, a load that
// fails said the same way every time, and code that the load itself runs
// answered at once instead of waiting for the load it is part of, and a
// constructor that asks while another thread's load waits for the loader's
// lock answered without waiting for that thread.
//
// Each suite runs with its own libnvidia-ml.so.1 on LD_LIBRARY_PATH
// (CMakeLists.txt beside this file), each test in a process of its own.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/nvidia/nvml_library.h"

using gpulimit::nvidia::load_nvml;
using gpulimit::nvidia::NvmlFunctions;

namespace {

// What code run by the partial library's dlopen was answered.
struct AnswerDuringLoad {
  bool asked = false;
  const NvmlFunctions* functions = nullptr;
  std::string why_not;
};
AnswerDuringLoad during_load;

}  // namespace

// Called by the partial libnvidia-ml.so.1 while it is being loaded.
extern "C" __attribute__((visibility("default"))) void gpulimit_nvml_test_loading() {
  const char* why = nullptr;
  during_load.asked = true;
  during_load.functions = load_nvml(&why);
  during_load.why_not = why ? why : "";
}

namespace {

// A thread that asks for NVML while the constructor below holds the
// loader's lock, and what it was answered.
std::thread other_thread;
std::atomic<bool> other_thread_asking{false};
const NvmlFunctions* other_thread_answer = nullptr;
const NvmlFunctions* constructor_answer = nullptr;

}  // namespace

// Called by the holding library's constructor, inside its dlopen.
extern "C" __attribute__((visibility("default"))) void gpulimit_nvml_test_in_constructor() {
  other_thread = std::thread([] {
    other_thread_asking = true;
    other_thread_answer = load_nvml();  // its dlopen waits for this thread's
  });
  while (!other_thread_asking)
    std::this_thread::yield();
  // Long enough for the other thread to be inside its load, waiting for the
  // loader's lock; when it is not yet, the test is merely easier to pass.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  constructor_answer = load_nvml();
}

namespace {

TEST(NvmlLibrary, FindsEveryFunctionOfACompleteLibrary) {
  // Act
  const NvmlFunctions* sut = load_nvml();

  // Assert
  ASSERT_NE(sut, nullptr);
#define EXPECT_LOADED(name) EXPECT_NE(sut->name, nullptr) << #name;
  GPULIMIT_NVML_FUNCTIONS(EXPECT_LOADED)
#undef EXPECT_LOADED
}

TEST(NvmlLibrary, TheFunctionsAreTheLibrarysOwn) {
  // Arrange
  const NvmlFunctions* sut = load_nvml();
  ASSERT_NE(sut, nullptr);
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);

  // Act
  const nvmlReturn_t initialised = sut->nvmlInit_v2();
  unsigned int count = 0;
  const nvmlReturn_t counted = sut->nvmlDeviceGetCount_v2(&count);

  // Assert
  EXPECT_EQ(initialised, NVML_SUCCESS);
  EXPECT_EQ(counted, NVML_SUCCESS);
  EXPECT_GE(count, 1u);
  EXPECT_EQ(sut->nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(reinterpret_cast<void*>(sut->nvmlDeviceGetMemoryInfo),
            dlsym(library, "nvmlDeviceGetMemoryInfo"));
  EXPECT_STREQ(sut->nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
}

TEST(NvmlLibrary, LoadsOnceHoweverManyThreadsAskFirst) {
  // Arrange
  constexpr int kThreads = 8;
  std::vector<const NvmlFunctions*> answers(kThreads, nullptr);
  std::vector<std::thread> threads;

  // Act
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&answers, i] { answers[i] = load_nvml(); });
  for (std::thread& thread : threads)
    thread.join();

  // Assert
  ASSERT_NE(answers[0], nullptr);
  for (const NvmlFunctions* answer : answers)
    EXPECT_EQ(answer, answers[0]);
  EXPECT_EQ(load_nvml(), answers[0]);
}

TEST(NvmlLibraryInAConstructor, AnswersWhileAnotherThreadWaitsForTheLoadersLock) {
  // Arrange: a deadlock shows as this alarm ending the test
  alarm(60);

  // Act: the constructor asks while the other thread's load waits for it
  void* library = dlopen(HOLDING_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  other_thread.join();
  alarm(0);

  // Assert: both answered, with the one published answer
  ASSERT_NE(constructor_answer, nullptr);
  EXPECT_EQ(other_thread_answer, constructor_answer);
  EXPECT_EQ(load_nvml(), constructor_answer);
  EXPECT_NE(constructor_answer->nvmlInit_v2, nullptr);
}

TEST(NvmlLibraryAlreadyLoaded, UsesTheCopyTheProcessHas) {
  // Arrange: loaded by its path, where no search for the name would find it
  void* library = dlopen(FAKECUDA_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();

  // Act
  const NvmlFunctions* sut = load_nvml();

  // Assert
  ASSERT_NE(sut, nullptr);
  EXPECT_EQ(reinterpret_cast<void*>(sut->nvmlInit_v2), dlsym(library, "nvmlInit_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(sut->nvmlDeviceGetUUID), dlsym(library, "nvmlDeviceGetUUID"));
}

TEST(NvmlLibraryPartial, LeavesAMissingFunctionNullAndTheOthersUsable) {
  // Act
  const NvmlFunctions* sut = load_nvml();

  // Assert
  ASSERT_NE(sut, nullptr);
  EXPECT_EQ(sut->nvmlDeviceGetUUID, nullptr);
  EXPECT_EQ(sut->nvmlDeviceGetMemoryInfo, nullptr);
  EXPECT_EQ(sut->nvmlDeviceGetComputeRunningProcesses_v3, nullptr);
  EXPECT_EQ(sut->nvmlErrorString, nullptr);
  ASSERT_NE(sut->nvmlInit_v2, nullptr);
  ASSERT_NE(sut->nvmlDeviceGetCount_v2, nullptr);
  EXPECT_EQ(sut->nvmlInit_v2(), NVML_SUCCESS);
  unsigned int count = 1;
  EXPECT_EQ(sut->nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
}

TEST(NvmlLibraryPartial, CodeThatTheLoadRunsIsAnsweredAtOnce) {
  // Act: the library's constructor asks during the load
  const NvmlFunctions* sut = load_nvml();

  // Assert: nothing yet, and no deadlock; loaded afterwards
  ASSERT_TRUE(during_load.asked);
  EXPECT_EQ(during_load.functions, nullptr);
  EXPECT_NE(during_load.why_not.find("being loaded"), std::string::npos) << during_load.why_not;
  EXPECT_NE(sut, nullptr);
}

TEST(NvmlLibraryUnloadable, SaysWhyEveryTime) {
  // Act
  const char* first = nullptr;
  const char* second = nullptr;
  const NvmlFunctions* loaded = load_nvml(&first);
  const NvmlFunctions* again = load_nvml(&second);

  // Assert: dlerror's line, naming the file
  EXPECT_EQ(loaded, nullptr);
  EXPECT_EQ(again, nullptr);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(std::string(first).find("libnvidia-ml.so.1"), std::string::npos) << first;
  EXPECT_STREQ(first, second);
}

}  // namespace
