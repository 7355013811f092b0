/* A complete libfusedcomm program in C: every rank sums its buffer with the others'.
 *
 * Build against an installed libfusedcomm:
 *     cc allreduce.c $(pkg-config --cflags --libs fusedcomm) -o allreduce
 * Run one process per GPU (fcrun sets FC_RANK, FC_WORLD_SIZE, FC_LOCAL_RANK and
 * FC_UNIQUE_ID, the rank-0 unique id as 256 hex characters):
 *     fcrun -n 4 -- ./allreduce
 * Run alone, it is a one-rank communicator. Without a GPU it prints why init failed
 * (a clear fcUnhandledCudaError) and exits 0: that is the expected outcome there. */
#include <cuda_runtime_api.h>
#include <fusedcomm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int envInt(const char* name, int def) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : def;
}

/* FC_UNIQUE_ID as written by fcrun: two lowercase hex digits per byte. */
static int idFromHex(const char* hex, fcUniqueId* id) {
  size_t i;
  if (strlen(hex) != 2 * sizeof id->internal) return 0;
  for (i = 0; i < sizeof id->internal; ++i) {
    unsigned int byte;
    if (sscanf(hex + 2 * i, "%2x", &byte) != 1) return 0;
    id->internal[i] = (char)byte;
  }
  return 1;
}

#define CHECK_FC(call)                                                                         \
  do {                                                                                         \
    fcResult_t r_ = (call);                                                                    \
    if (r_ != fcSuccess) {                                                                     \
      fprintf(stderr, "%s: %s: %s\n", #call, fcGetErrorString(r_), fcGetLastError(NULL));      \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

int main(void) {
  const int rank = envInt("FC_RANK", 0), nranks = envInt("FC_WORLD_SIZE", 1);
  const char* hex = getenv("FC_UNIQUE_ID");
  const size_t count = 1 << 20;
  int version = 0, ndev = 0, bad = 0;
  size_t i;
  fcUniqueId id;
  fcComm_t comm;
  fcResult_t res;
  float *buf, *host;

  CHECK_FC(fcGetVersion(&version));
  printf("libfusedcomm %d.%d.%d, rank %d of %d\n", version / 10000, version / 100 % 100, version % 100, rank,
         nranks);
  if (hex != NULL) {
    if (!idFromHex(hex, &id)) {
      fprintf(stderr, "FC_UNIQUE_ID is not 256 hex characters\n");
      return 1;
    }
  } else {
    CHECK_FC(fcGetUniqueId(&id));
  }
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  if (ndev > 0) cudaSetDevice(envInt("FC_LOCAL_RANK", rank) % ndev);

  res = fcCommInitRank(&comm, nranks, id, rank);
  if (res != fcSuccess) {
    printf("fcCommInitRank: %s: %s\n", fcGetErrorString(res), fcGetLastError(NULL));
    return ndev == 0 && res == fcUnhandledCudaError ? 0 : 1;
  }

  /* Rank r contributes r + 1 everywhere; the sum is n(n+1)/2. */
  host = malloc(count * sizeof(float));
  for (i = 0; i < count; ++i) host[i] = (float)(rank + 1);
  if (cudaMalloc((void**)&buf, count * sizeof(float)) != cudaSuccess) return 1;
  cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice);
  /* In place, on the legacy default stream; asynchronous like a kernel launch. */
  CHECK_FC(fcAllReduce(buf, buf, count, fcFloat32, fcSum, comm, NULL));
  cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost); /* waits for it */
  for (i = 0; i < count; ++i) bad += host[i] != (float)(nranks * (nranks + 1) / 2);
  CHECK_FC(fcCommDestroy(comm));
  cudaFree(buf);
  free(host);
  printf("rank %d: all-reduce of %zu floats %s\n", rank, count, bad ? "WRONG" : "OK");
  return bad != 0;
}
