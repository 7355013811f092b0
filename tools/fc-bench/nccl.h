// NCCL, loaded at run time for side-by-side columns: fc-bench has no build-time
// dependency on it. The few types are declared here with NCCL's ABI (nccl.h).
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

struct NcclApi {
  struct UniqueId {
    char internal[128];
  };
  using Comm = struct ncclComm*;
  // ncclDataType_t and ncclRedOp_t are ints; our fcDataType_t values are NCCL's.
  int (*getUniqueId)(UniqueId*) = nullptr;
  int (*commInitRank)(Comm*, int, UniqueId, int) = nullptr;
  int (*commDestroy)(Comm) = nullptr;
  int (*allReduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  int (*reduceScatter)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  int (*allGather)(const void*, void*, size_t, int, Comm, cudaStream_t) = nullptr;
  int (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(int) = nullptr;

  // dlopen FC_NCCL_LIBRARY, else libnccl.so.2; false (with `why`) if unavailable.
  bool load(std::string* why) {
    const char* path = getenv("FC_NCCL_LIBRARY");
    void* h = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      *why = dlerror();
      return false;
    }
    bool ok = sym(h, "ncclGetUniqueId", &getUniqueId) && sym(h, "ncclCommInitRank", &commInitRank) &&
              sym(h, "ncclCommDestroy", &commDestroy) && sym(h, "ncclAllReduce", &allReduce) &&
              sym(h, "ncclReduceScatter", &reduceScatter) && sym(h, "ncclAllGather", &allGather) &&
              sym(h, "ncclGetVersion", &getVersion) && sym(h, "ncclGetErrorString", &getErrorString);
    if (!ok) *why = "a symbol is missing from the NCCL library";
    return ok;
  }

 private:
  template <typename F>
  static bool sym(void* h, const char* name, F* f) {
    *f = reinterpret_cast<F>(dlsym(h, name));
    return *f != nullptr;
  }
};
