#include "context_storage.h"

namespace fakecuda {

CUresult ContextStorage::put(const void* key, void* value, StorageDestructor destructor) {
  std::lock_guard<std::mutex> guard(writers_);
  const size_t used = used_.load(std::memory_order_relaxed);
  Entry* free_entry = nullptr;
  for (size_t i = 0; i < used; ++i) {
    Entry& e = entries_[i];
    const void* k = e.key.load(std::memory_order_relaxed);
    if (k == key) {
      e.value.store(value, std::memory_order_relaxed);
      e.destructor = destructor;
      return CUDA_SUCCESS;
    }
    if (!k && !free_entry) free_entry = &e;
  }
  if (!free_entry) {
    if (used == kCapacity) return CUDA_ERROR_OUT_OF_MEMORY;
    free_entry = &entries_[used];
    used_.store(used + 1, std::memory_order_release);
  }
  free_entry->value.store(value, std::memory_order_relaxed);
  free_entry->destructor = destructor;
  free_entry->key.store(key, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult ContextStorage::remove(const void* key) {
  std::lock_guard<std::mutex> guard(writers_);
  const size_t used = used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    if (entries_[i].key.load(std::memory_order_relaxed) == key) {
      entries_[i].key.store(nullptr, std::memory_order_release);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

std::vector<ContextStorage::Pending> ContextStorage::take_all() {
  std::lock_guard<std::mutex> guard(writers_);
  std::vector<Pending> pending;
  const size_t used = used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    Entry& e = entries_[i];
    const void* key = e.key.load(std::memory_order_relaxed);
    if (!key) continue;
    if (e.destructor)
      pending.push_back(
          Pending{const_cast<void*>(key), e.value.load(std::memory_order_relaxed), e.destructor});
    e.key.store(nullptr, std::memory_order_release);
  }
  used_.store(0, std::memory_order_release);
  return pending;
}

}  // namespace fakecuda
