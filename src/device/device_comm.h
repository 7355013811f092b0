// What a kernel knows about its communicator: a plain struct passed by value as a
// kernel argument (host and device code both include this header).
//
// Layout of every rank's symmetric allocation (offsets from the rank's base):
//   [0, kFlagBytes)                 signal pad: flags[channel][block][sender rank], 64-bit
//                                   {low: epoch, high: op signature}
//   [kFlagBytes, +kEpochBytes)      epochs[channel][block]: this rank's private counters
//   [kGuardOffset, +4)              error guard: 0 until a CTA of this rank gives up
//   [kPeerAbortOffset, +4)          0, or 1 + the rank that aborted (written by that peer)
//   [kHostPollOffset, +8)           when a thread of this rank last read the host's abort
//                                   flag (globaltimer ns; device/sync.cuh, WaitExits)
//   [kLamportStateOffset, +24 KiB)  lamport[channel][block][24]: per Lamport kind, {buffer
//                                   index, chunks per buffer and set}, and the call header
//                                   buffer index (collectives/lamport.cuh)
//   [kShardFlagsOffset, +128)       the all-gather + GEMM engine's flags[channel][rank],
//                                   written by this rank's copy engine: shards of A pulled
//   [kPushFlagsOffset, +128)        pushFlags[channel][rank]: all-gather + GEMM's pushed
//                                   shards (written by the peers' copy engines)
//   [kTileCountersOffset, +1 KiB)   tileCounters[channel][rank][piece]: GEMM + reduce-
//                                   scatter's tiles of our block stored by each rank (the
//                                   chain, 3-8 ranks: [channel][block][piece], the next
//                                   rank's running sums of that block)
//   [kTileTicketsOffset, +8)        tileTickets[channel]: the GEMM + reduce-scatter
//                                   engine's next tile to hand out (this rank's GEMM)
//   [kPushCountersOffset, +128)     pushCounters[channel][piece]: the SM push kernel's
//                                   CTAs done with each piece (this rank's kernel)
//   [kBarrierMetOffset, +8)         barrierMet[channel]: whether this rank's last op barrier
//                                   that was asked met every peer cleanly (collectives/barrier.cu)
//   [kRowSumsOffset, +32 KiB)       rowSums[channel][row][block]: fcMatmulAllReduce's decode
//                                   kernel's sums of squares per block, with the norm inside
//                                   (this rank's kernel only; fused/gemv_finish.cuh)
//   [kSignalBytes, +lamport bytes)  per channel, the push buffers of the Lamport all-reduces,
//                                   [buffer 3][set 4][peer W-1][lamportSlotBytes(W)], then
//                                   their call headers, [buffer 3][block][sender rank][16 B]
//                                   (FC_ARNORM_GATHER_SET=1: then, per channel, the two-shot
//                                   norm's gather sets, [buffer 3][peer W-1][slot])
//   [workspaceOffset + c*workspaceBytes, +workspaceBytes)  channel c's workspace
#pragma once

#include <cstddef>
#include <cstdint>

namespace fc {

constexpr int kMaxRanks = 16;      // NVSwitch nodes have at most 8 GPUs; headroom
// Channels: independent sets of signal slots, Lamport buffers and workspace. One
// carries the ops issued eagerly, the other those captured into graphs (comm/ops.cc).
constexpr int kMaxChannels = 2;
constexpr int kMaxBlocks = 128;    // CTAs a collective kernel may use per channel
constexpr size_t kFlagBytes = size_t(kMaxChannels) * kMaxBlocks * kMaxRanks * sizeof(uint64_t);
constexpr size_t kEpochBytes = size_t(kMaxChannels) * kMaxBlocks * sizeof(uint32_t);
constexpr size_t kGuardOffset = kFlagBytes + kEpochBytes;
constexpr size_t kPeerAbortOffset = kGuardOffset + sizeof(uint32_t);
constexpr size_t kHostPollOffset = kPeerAbortOffset + 4;       // 8-byte aligned
constexpr size_t kLamportStateOffset = kPeerAbortOffset + 60;  // 64-byte aligned
static_assert(kHostPollOffset % 8 == 0 && kHostPollOffset + 8 <= kLamportStateOffset, "the host poll word's place");
constexpr size_t kLamportStateWords = 24;  // per (channel, CTA): 8 per Lamport kind
constexpr size_t kLamportStateBytes = size_t(kMaxChannels) * kMaxBlocks * kLamportStateWords * sizeof(uint32_t);
// The all-gather + GEMM engine's shard flags, [channel][rank], this rank's only
// (written by its copy engine, read by its GEMM): entry s counts the pieces of shard s
// pulled (gemm/engine/readiness_scheduler.cuh). Each op leaves them zero.
constexpr size_t kShardFlagsOffset = kLamportStateOffset + kLamportStateBytes;
constexpr size_t kShardFlagsBytes = size_t(kMaxChannels) * kMaxRanks * sizeof(uint32_t);
// All-gather + GEMM's flags when the peers push their shards, [channel][rank]: entry r
// counts the pieces of rank r's shard its copy engine has written into our workspace
// (fused/allgather_matmul.cc, viaEnginePush). Apart from the words above because that
// op ends without a barrier: a peer already in the next op (the GEMM + reduce-scatter
// engine, whose tile counters start at once) must not find its signals wiped by our
// clearing these. Left zero by each call.
constexpr size_t kPushFlagsOffset = kShardFlagsOffset + kShardFlagsBytes;
// GEMM + reduce-scatter's tile counters, [channel][rank][piece]: entry (r, p) counts
// the tiles of piece p of our block (kMaxPieces pieces of whole tile rows at most)
// that rank r has stored (gemm/engine/tile_signal_epilogue.cuh: release adds from
// r's epilogue). Each op leaves them zero, before its final barrier: a peer starts
// counting the next call's tiles only after that barrier.
constexpr int kMaxPieces = 16;
constexpr size_t kTileCountersOffset = kPushFlagsOffset + kShardFlagsBytes;
constexpr size_t kTileCountersBytes = size_t(kMaxChannels) * kMaxRanks * kMaxPieces * sizeof(uint32_t);
// The GEMM + reduce-scatter engine's tile tickets, [channel]: this rank's GEMM hands
// its tiles out in order to whichever cluster asks next, by an atomic add on its
// channel's word (gemm/engine/scatter_scheduler.cuh); the cluster that draws the
// grid's last ticket puts it back to zero, so each call finds it zero.
constexpr size_t kTileTicketsOffset = kTileCountersOffset + kTileCountersBytes;
constexpr size_t kTileTicketsBytes = size_t(kMaxChannels) * sizeof(uint32_t);
// All-gather + GEMM's shard pushes by SMs (FC_AGMM_ENGINE_PUSH=sm), [channel][piece]:
// the push kernel's CTAs add 1 to a piece's word once their part of it is stored; the
// CTA that completes the count flags the piece to the peers, and the one that completes
// the last piece's puts every word back to zero (fused/shard_push.cu).
constexpr int kMaxPushPieces = 16;
constexpr size_t kPushCountersOffset = kTileTicketsOffset + kTileTicketsBytes;
constexpr size_t kPushCountersBytes = size_t(kMaxChannels) * kMaxPushPieces * sizeof(uint32_t);
// An op barrier's outcome, [channel], where its launch asks for it (launchOpBarrier's
// met): 1 when every peer met it with our signature and no rank had given up, else 0.
// Written by that barrier's grid alone, so a kernel launched behind it with PDL reads the
// same value in every thread after griddepcontrol.wait (fcMatmulAllReduce's engine stores
// its sums into the peer's C only after a 1: a mismatched peer's C may lie elsewhere).
constexpr size_t kBarrierMetOffset = kPushCountersOffset + kPushCountersBytes;
constexpr size_t kBarrierMetBytes = size_t(kMaxChannels) * sizeof(uint32_t);
// fcMatmulAllReduce's decode kernel with the residual + RMSNorm inside it, [channel][row]
// [block]: block b's sum of squares of row `row` over the columns it owns, as one 64-bit
// word {low: the call's epoch, high: the fp32 sum's bits}, which every block of the same
// kernel polls for (fused/gemv_finish.cuh, finishNormed). The rank's own words: no peer
// reads or writes them. The epoch tags each call (a call never takes a word of an earlier
// one for its own), so nothing is cleared between calls.
constexpr int kRowSumsRows = 16;  // fcMatmulAllReduce's decode kernel's most rows
constexpr size_t kRowSumsOffset = (kBarrierMetOffset + kBarrierMetBytes + 63) / 64 * 64;
constexpr size_t kRowSumsBytes = size_t(kMaxChannels) * kRowSumsRows * kMaxBlocks * sizeof(uint64_t);
constexpr size_t kSignalBytes = 256 * 1024;  // the above, rounded up
static_assert(kLamportStateOffset % 64 == 0, "lamport state misaligned");
static_assert(kRowSumsOffset + kRowSumsBytes <= kSignalBytes, "signal region too small");

// The Lamport push slots. Every set of a buffer holds one slot per *peer* of the owner
// (no rank pushes to itself: its own part is read from its input), peer p being rank
// owner + 1 + p; a slot's size is the one-shot's payload limit per rank. At 2 ranks a
// set has a single slot, and a larger one costs no more memory than 4 ranks' sets:
// there the one-shot moves the same bytes over NVLink as the two-shot (each rank sends
// its whole input once) with one round trip instead of two, so it is worth taking to
// larger sizes (design.md, "Lamport all-reduces"). The two-shot uses the first
// kLamportTwoShotSliceBytes of its slots per pass whatever their size.
// The push area per channel: three buffers (a call uses one, clears the one the call
// before used, and the third may already be filled by a peer that is one call
// ahead), each of four sets (the one-shot's; the two-shot's reduce-scatter and
// all-gather pushes; the all-reduce + RMSNorm's) of W-1 slots. After them, the call
// headers of the Lamport kernels (collectives/lamport.cuh, LamportCall): three buffers
// of one 16-byte pack per (CTA, sender rank).
constexpr size_t kLamportSlotBytesMax = 4u << 20;
constexpr size_t lamportSlotBytes(int nranks) { return nranks <= 2 ? kLamportSlotBytesMax : size_t(1) << 20; }
constexpr size_t kLamportTwoShotSliceBytes = size_t(1) << 20;
constexpr size_t kLamportSets = 4;
constexpr size_t lamportPeerSlots(int nranks) { return nranks > 1 ? size_t(nranks - 1) : 0; }  // none alone
constexpr size_t lamportPushBytes(int nranks) {
  return 3 * kLamportSets * lamportPeerSlots(nranks) * lamportSlotBytes(nranks);
}
constexpr size_t lamportCallBytes(int nranks) { return 3 * size_t(kMaxBlocks) * size_t(nranks) * 16; }
constexpr size_t lamportChannelBytes(int nranks) { return lamportPushBytes(nranks) + lamportCallBytes(nranks); }
// FC_ARNORM_GATHER_SET=1 (a measurement form): after every channel's Lamport area, per
// channel one more set for the all-reduce + RMSNorm two-shot's all-gather pushes, three
// buffers of W-1 slots, so that a pass fills whole slots (8 MiB at 2 ranks) instead of
// halves of the Rows set's: 12 MiB more per channel at 2 ranks, 9 at 4, 21 at 8.
constexpr size_t lamportGatherBytes(int nranks) { return 3 * lamportPeerSlots(nranks) * lamportSlotBytes(nranks); }
// A Lamport buffer word never holds this (writers turn all-ones words, which are NaNs,
// into other NaNs): it marks "not written yet". Byte-wise 0xff, so cudaMemset sets it.
constexpr uint32_t kLamportEmpty = 0xffffffffu;

// The stages of the Lamport one-shot kernel (FC_LAMPORT_STAGES): all of them once
// (kLamportFull) in every real call; the others leave stages out or run them twice, to
// time what each costs (fc-bench stages). Those break the protocol: their
// results are wrong, and the communicator is fit only for more such calls.
enum LamportStage : uint32_t {
  kLamportPush = 1,         // push our input into every peer's buffer
  kLamportSum = 2,          // poll for the peers' packs, sum, store
  kLamportReset = 4,        // reset the buffer of the run before
  kLamportSave = 8,         // save the per-CTA state (buffer index, chunk counts)
  kLamportPushTwice = 16,   // with kLamportPush: push twice
  kLamportSumTwice = 32,    // with kLamportSum: poll, sum and store twice
  kLamportResetTwice = 64,  // with kLamportReset: reset twice
  kLamportCall = 128,       // the call warp's header exchange (mismatch detection)
  // Each peer pack cleared right after it is read (the Rows kind's way), with
  // kLamportReset off: no sweep of the run before's buffer. Right sums only while every
  // call on the communicator is the one-shot all-reduce (the all-gather and
  // reduce-scatter on the same buffers still leave theirs to the sweep).
  kLamportClearRead = 256,
  // With kLamportReset: the reset after the sums instead of before the polls
  // (kLamportResetLate), or by the call warp once its header exchange is done, while the
  // data threads poll (kLamportResetByCallWarp). Both right sums: the stale buffer is
  // free until our next run has started, i.e. after this kernel.
  kLamportResetLate = 512,
  kLamportResetByCallWarp = 1024,
  // No stage changed: only picks the measurement kernel (the one every set but
  // kLamportFull runs), as the baseline of the other sets: that kernel's stage branches
  // cost time of their own (measured 0.3 us at 64 KiB, 1 us at 4 MiB on 2 H200s).
  kLamportMeasured = 2048,
  // Every stage once, in the lean form of the production kernel (allreduce_lamport.cu,
  // kLean): 32-bit index arithmetic and an unchecked path for whole aligned packs in its
  // push and sum loops. Right sums; no stage branches (the `full` column's kernel but for
  // those loops), so it is timed against `full` directly.
  kLamportLean = 4096,
  // Every stage once, the next kernel allowed to launch (programmatic dependent launch)
  // only when a CTA has stored its sums, not once its pushes are issued, at every size
  // (FlashInfer's one-shot's way). Right sums; no stage branches (timed against `full`).
  kLamportLateTrigger = 8192,
  // Every stage once, the production kernel's CTAs placed one to an SM at every size
  // (kLamportSolo), or never (kLamportShared), where real calls place them by the packs
  // a data thread owns (tuning::lamportSoloCtas). Why alone can be faster: a next grid
  // launched early under PDL places its CTAs beside ours (two fit an SM) and keeps that
  // placement, so some of its CTAs share an SM's load/store issue for their whole call;
  // with unused dynamic shared memory of more than half an SM (DeviceComm::soloSmemBytes)
  // they wait for ours to leave an SM instead. Right sums.
  kLamportShared = 16384,
  kLamportSolo = 32768,
  // The production kernel (CTAs placed by the rule) with per-CTA phase stamps: pushes
  // issued, reset issued, first and last pack summed (cycles), the CTAs' start and end
  // spread (ns), printed as "# timeline" lines every 64 calls (collectives/
  // lamport_timeline.cuh). Right sums; the stamps' shared-memory atomics cost a little.
  kLamportTimeline = 65536,
  // Every stage once, the production kernel's CTAs kept at 512 data threads where real
  // calls run them with up to 992, one per pack (a CTA owning 513-992 packs, at 2 ranks in
  // bf16 1-1.75 MiB: the kernel built for 1024 threads, tuning::lamportWideCtas); other
  // sizes as `full`. Right sums. The wide CTAs came from the full grid at 2 ranks, where
  // 512 data threads were 0.4-0.7 us above the push-rate probe's minimal Lamport one-shot
  // at 576-700 packs a CTA (1.1-1.4 MiB), whose CTAs grow to one pack a thread (forty-ninth
  // and fiftieth sessions, design.md).
  kLamportNarrow = 131072,
  // Every stage once, the wide production kernel wherever a CTA owns more than 512 packs
  // (also beyond 992: at 2 ranks, up to 2048 packs a CTA at 4 MiB, its 992 data threads
  // then own 2-3 packs, where 512 own 2-4): whether wide CTAs would pay beyond the rule's
  // 992. Right sums.
  kLamportWide = 262144,
  kLamportFull = kLamportPush | kLamportSum | kLamportReset | kLamportSave | kLamportCall,
};

// Operations, as recorded in an error record.
enum class Op : uint32_t {
  None = 0,
  AllReduceOneShot = 1,
  Barrier = 2,
  AllReduceTwoShot = 3,
  ReduceScatter = 4,
  AllGather = 5,
  ReduceScatterCe = 6,  // copy-engine variants: their barriers carry these
  AllGatherCe = 7,
  AllGatherMatmul = 8,
  MatmulReduceScatter = 9,
  AllReduceNorm = 10,  // fcAllReduceResidualRMSNorm
  MatmulAllReduce = 11,  // fcMatmulAllReduce and its residual + RMSNorm forms
};

// Why a device wait gave up, as recorded in an error record.
enum class GiveUp : uint32_t { None = 0, Timeout = 1, Abort = 2, PeerAbort = 3, Mismatch = 4 };

// What a device wait was waiting for: a peer's epoch in a signal pad, a peer's
// pushed data in a Lamport buffer, a shard of the all-gather + GEMM engine's A, or a
// peer's partial tiles of our block (the GEMM + reduce-scatter engine: its gates, and
// its epilogue's reads in place), or the other blocks of this rank's own kernel (the
// decode kernel's row sums of squares, kRowSumsOffset).
enum class WaitKind : uint32_t { Epoch = 0, LamportData = 1, Shard = 2, Tiles = 3, RowSums = 4 };

// What a rank is doing at a barrier, carried next to the epoch so that ranks calling
// different collectives (or counts) at the same point notice: op (4 bits), dtype (4
// bits: fcDataType_t value), count mod 2^24.
constexpr uint32_t opSignature(Op op, uint32_t dtype, uint64_t count) {
  return (uint32_t(op) << 28) | ((dtype & 15u) << 24) | uint32_t(count & 0xffffffu);
}

// The op a signature names (its top 4 bits). The kernels record it, not their own, in
// an error record: a collective launched by a fused op with the fused op's signature
// (fcMatmulAllReduce's all-reduce or rows kernel, fcMatmulReduceScatter's reduce-scatter)
// then reports the op the user called, which is what a timeout's message must name.
constexpr Op opOf(uint32_t sig) { return Op(sig >> 28); }
static_assert(opOf(opSignature(Op::MatmulAllReduce, 15u, ~0ull)) == Op::MatmulAllReduce &&
                  uint32_t(Op::MatmulAllReduce) < 16u,
              "every Op fits the signature's 4 bits, and opOf reads them back");

// The "count" of a fused GEMM op's signature: its whole shape (M, N, K, transB) folded
// into 24 bits (FNV-1a), so that ranks calling with different shapes are caught.
constexpr uint64_t shapeKey(uint64_t M, uint64_t N, uint64_t K, uint32_t transB) {
  uint64_t h = 1469598103934665603ull;
  const uint64_t parts[4] = {M, N, K, transB};
  for (uint64_t v : parts)
    for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return (h ^ (h >> 24) ^ (h >> 48)) & 0xffffffu;
}
constexpr bool isFusedOp(uint32_t op) {  // and the all-reduce + RMSNorm: a shape hash too
  return op == uint32_t(Op::AllGatherMatmul) || op == uint32_t(Op::MatmulReduceScatter) ||
         op == uint32_t(Op::MatmulAllReduce) || op == uint32_t(Op::AllReduceNorm);
}

// Written by the first device thread that gives up (timeout or abort); lives in
// host-mapped pinned memory so the host can read it while kernels still run. The
// "first" is decided by an atomic on the guard word in device memory (atomics on
// host memory over PCIe are not guaranteed); the record itself takes plain stores.
struct ErrorRecord {
  uint32_t state;     // 0 empty, 2 complete (the host reads the fields only then)
  uint32_t op;        // Op
  uint32_t reason;    // GiveUp
  int32_t rank;       // the rank that gave up
  int32_t peer;       // the peer it waited for
  int32_t block;      // the CTA
  int32_t channel;
  uint32_t expected;  // epoch it waited for (Mismatch: this rank's op signature)
  uint32_t seen;      // epoch it last saw (Mismatch: the peer's op signature)
  uint32_t abortFlag; // set by the host (fcCommAbort): every spin-wait gives up
  uint32_t waitKind;  // WaitKind (LamportData: expected = push buffer; Shard: peer = its shard;
                      // Tiles: expected = tiles, seen = tiles signalled)
};

// The Lamport kernels (one-shot, two-shot, reduce-scatter / all-gather moves) take it
// as `const __grid_constant__ DeviceComm dc` and pass it on by reference: a plain
// by-value parameter whose address is taken is first copied into every thread's stack,
// a __grid_constant__ one is read in place from the parameter space (design.md, "The
// parameter in place"). The other kernels had no such frame and keep theirs.
struct DeviceComm {
  char* base;               // rank 0's mapping; rank r's is base + r*stride
  uint64_t stride;
  int rank;
  int nranks;
  uint64_t lamportOffset;   // heap offset of channel 0's Lamport push buffers
  uint64_t rowsGatherOffset;  // heap offset of channel 0's two-shot norm gather sets (0: none)
  uint64_t workspaceOffset; // heap offset of channel 0's workspace
  uint64_t workspaceBytes;  // per channel; channel c's starts at workspaceOffset + c*workspaceBytes
  int maxCtas;              // CTAs per kernel: workspace chunk k belongs to CTA k % maxCtas
  uint32_t lamportSpins;    // Lamport data polls before the first back-off (FC_LAMPORT_SPINS)
  // 1: FC_LAMPORT_SPINS was given, and every Lamport kernel polls by it; 0: the all-reduce
  // + RMSNorm's one kernel takes tuning::normLamportSpins instead (read on the host).
  uint32_t lamportSpinsSet;
  // Dynamic shared memory (unused) that keeps a Lamport one-shot CTA alone on its SM:
  // more than half an SM's; 0 where ranks share a GPU (FC_SHARE_GPU), whose kernels must
  // be resident together (tuning::lamportSoloCtas says where it is used).
  uint32_t soloSmemBytes;
  uint64_t timeoutNs;       // spin-wait deadline
  ErrorRecord* error;       // device pointer of the host-mapped record
};

// Rank r's engine flags of channel c at `offset` (kShardFlagsOffset or
// kPushFlagsOffset: [channel][rank] words), as this rank maps them.
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t* engineFlagsOf(const DeviceComm& dc, size_t offset, int r, int channel) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(r) * dc.stride + offset) + size_t(channel) * kMaxRanks;
}

// This rank's shard flags of channel c.
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t* shardFlags(const DeviceComm& dc, int channel) {
  return engineFlagsOf(dc, kShardFlagsOffset, dc.rank, channel);
}

// Rank r's tile counters of channel c (GEMM + reduce-scatter), as this rank maps
// them: entry [signaller * kMaxPieces + piece]; at 3-8 ranks with the chain of running
// sums, [block * kMaxPieces + piece], all signalled by rank r+1.
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t* tileCountersOf(const DeviceComm& dc, int r, int channel) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(r) * dc.stride + kTileCountersOffset) +
         size_t(channel) * kMaxRanks * kMaxPieces;
}

// This rank's tile ticket of channel c (GEMM + reduce-scatter's engine).
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t* tileTicketOf(const DeviceComm& dc, int channel) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kTileTicketsOffset) + channel;
}

// This rank's op barrier outcome word of channel c (kBarrierMetOffset).
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t* barrierMetOf(const DeviceComm& dc, int channel) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kBarrierMetOffset) + channel;
}

// Heap offset of channel c's workspace (the same on every rank; see the layout above).
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint64_t channelWorkspaceOffset(const DeviceComm& dc, int channel) {
  return dc.workspaceOffset + uint64_t(channel) * dc.workspaceBytes;
}

// Where a kernel reads every rank's copy of a buffer: base + rank*stride + offset
// (a symmetric heap: the communicator's own, or one from fcMemAlloc).
struct SymSource {
  const char* base;
  uint64_t stride;
  uint64_t offset;
};

}  // namespace fc
