// Context-local storage: the values the CUDA runtime keeps per context
// through the driver's private CONTEXT_LOCAL_STORAGE table (see
// export_tables.cpp). The runtime looks its value up on every one of its
// calls, so a lookup takes no lock: writers (put, delete) serialise on the
// context's own mutex and publish an entry by storing its key last.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace fakecuda {

using StorageDestructor = void (*)(CUcontext ctx, void* key, void* value);

class ContextStorage {
 public:
  // Each runtime linked into the process (libcudart, and every library with
  // a static one: cuBLAS, cuDNN, cuFFT, ...) keeps one key per context.
  static constexpr size_t kCapacity = 128;

  // CUDA_ERROR_OUT_OF_MEMORY when all entries are taken; a key put again
  // takes the new value and destructor.
  CUresult put(const void* key, void* value, StorageDestructor destructor);
  // CUDA_ERROR_INVALID_HANDLE for a key that is not there.
  CUresult remove(const void* key);
  bool get(const void* key, void** value) const {
    const size_t used = used_.load(std::memory_order_acquire);
    for (size_t i = 0; i < used; ++i) {
      if (entries_[i].key.load(std::memory_order_acquire) == key) {
        *value = entries_[i].value.load(std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  struct Pending {
    void* key;
    void* value;
    StorageDestructor destructor;
  };
  // Empties the storage and returns what its destructors must be called
  // with (by the caller, without the driver's lock).
  std::vector<Pending> take_all();

 private:
  struct Entry {
    std::atomic<const void*> key{nullptr};
    std::atomic<void*> value{nullptr};
    StorageDestructor destructor = nullptr;
  };
  std::mutex writers_;
  std::atomic<size_t> used_{0};  // entries at or above this index were never used
  Entry entries_[kCapacity];
};

}  // namespace fakecuda
