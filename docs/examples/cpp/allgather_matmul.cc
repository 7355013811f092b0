// libfusedcomm from C++: a small RAII communicator and the tensor-parallel pair,
// fcAllGatherMatmul then fcMatmulReduceScatter, on one stream.
//
// Build against an installed libfusedcomm:
//     c++ -std=c++17 allgather_matmul.cc $(pkg-config --cflags --libs fusedcomm) -o agmm
// Run one process per GPU:  fcrun -n 4 -- ./agmm
// Without a GPU it reports the init error and exits 0 (the expected outcome there).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fusedcomm.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct FcError : std::runtime_error {
  fcResult_t code;
  FcError(fcResult_t c, const std::string& what)
      : std::runtime_error(what + ": " + fcGetErrorString(c) + ": " + fcGetLastError(nullptr)), code(c) {}
};

void check(fcResult_t r, const char* what) {
  if (r != fcSuccess) throw FcError(r, what);
}

int envInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}

class Communicator {
 public:
  Communicator(int nranks, const fcUniqueId& id, int rank) { check(fcCommInitRank(&comm_, nranks, id, rank), "init"); }
  ~Communicator() { fcCommDestroy(comm_); }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  fcComm_t get() const { return comm_; }

 private:
  fcComm_t comm_ = nullptr;
};

fcUniqueId idFromEnv() {
  fcUniqueId id{};
  const char* hex = std::getenv("FC_UNIQUE_ID");
  if (hex == nullptr) {
    check(fcGetUniqueId(&id), "fcGetUniqueId");
    return id;
  }
  if (std::string(hex).size() != 2 * sizeof id.internal) throw std::runtime_error("bad FC_UNIQUE_ID");
  for (size_t i = 0; i < sizeof id.internal; ++i) id.internal[i] = char(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16));
  return id;
}

template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(p); }
  T* p = nullptr;
};

}  // namespace

int main() {
  const int rank = envInt("FC_RANK", 0), nranks = envInt("FC_WORLD_SIZE", 1);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  if (ndev > 0) cudaSetDevice(envInt("FC_LOCAL_RANK", rank) % ndev);
  try {
    Communicator comm(nranks, idFromEnv(), rank);
    // A tensor-parallel MLP block: X [M, K] is sharded by rows; W1 [K, H] and W2 [H, K]
    // are this rank's column / row shards of the weights.
    const size_t M = 512 * size_t(nranks), K = 1024, H = 2048;
    std::vector<__nv_bfloat16> h(M * H);
    for (auto& v : h) v = __float2bfloat16(1.0f / 64);  // exact in bf16
    DeviceBuffer<__nv_bfloat16> x(M / nranks * K), w1(K * H), y(M * H), w2(H * K), out(M / nranks * K);
    cudaMemcpy(x.p, h.data(), M / nranks * K * sizeof h[0], cudaMemcpyHostToDevice);
    cudaMemcpy(w1.p, h.data(), K * H * sizeof h[0], cudaMemcpyHostToDevice);
    cudaMemcpy(w2.p, h.data(), H * K * sizeof h[0], cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    // Y = allgather(X) x W1, then OUT = rows of sum over ranks of Y x W2.
    check(fcAllGatherMatmul(x.p, w1.p, y.p, nullptr, M, H, K, fcOpN, fcBfloat16, comm.get(), s), "agmm");
    check(fcMatmulReduceScatter(y.p, w2.p, out.p, M, K, H, fcOpN, fcBfloat16, comm.get(), s), "mmrs");
    std::vector<__nv_bfloat16> got(M / nranks * K);
    cudaMemcpyAsync(got.data(), out.p, got.size() * sizeof got[0], cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    // Every Y element is K / 64^2 = 0.25; every OUT element is nranks * H * 0.25 / 64.
    const float want = float(nranks) * float(H) * 0.25f / 64.0f;
    size_t bad = 0;
    for (auto v : got) bad += __bfloat162float(v) != want;
    std::printf("rank %d: all-gather + matmul, matmul + reduce-scatter: %s\n", rank, bad ? "WRONG" : "OK");
    return bad != 0;
  } catch (const FcError& e) {
    std::printf("%s\n", e.what());
    return ndev == 0 && e.code == fcUnhandledCudaError ? 0 : 1;
  }
}
