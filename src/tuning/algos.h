// The algorithm names every layer shares: what a caller may force (FC_*_ALGO, parsed in
// comm/config.cc) and what the tuning module (tuning.h) answers. Plain enums, no
// dependencies, so that the lowest layer can hold the choices and the highest can ask.
// docs/design.md, "Map" and "Tuning".
#pragma once

namespace fc {

// All-reduce: the one-shot (Lamport up to its limit, else with barriers), the SM
// two-shot with barriers, the Lamport two-shot, the copy-engine two-shot.
// FC_ALLREDUCE_ALGO; Auto only as a request, never as an answer.
enum class AllReduceAlgo { Auto, OneShot, TwoShot, LamportTwoShot, CopyEngine };

// Reduce-scatter and all-gather: SM pull kernels, copy-engine transfers, or the Lamport
// kernels (collectives/lamport_move.cu). FC_REDUCE_SCATTER_ALGO / FC_ALLGATHER_ALGO
// (Lamport: FC_REDUCE_SCATTER_ALGO only; the all-gather's Lamport kernel is taken by
// fcAllGatherMatmul's unfused path alone).
enum class MoveAlgo { Auto, Sm, CopyEngine, Lamport };

// The fused GEMM ops (fcAllGatherMatmul, fcMatmulReduceScatter): the cuBLASLt pipeline
// (per-block GEMMs overlapped with copy-engine transfers), communication then one GEMM,
// or the persistent CUTLASS engine (src/gemm/engine). FC_AGMM_ALGO / FC_MMRS_ALGO
// ("pipeline", or its old spelling "fused"; "unfused"; "engine").
enum class FusedAlgo { Auto, Pipeline, Unfused, Engine };

// fcMatmulReduceScatter's resolved path: FusedAlgo's two fused ones, and the three ways
// it runs unfused (GEMM + the Lamport reduce-scatter, the scatter GEMM into the owners'
// workspaces, or GEMM into scratch + fcReduceScatter's kernel).
enum class MmrsPath { Pipeline, Engine, Lamport, Scatter, Staged };

// fcAllReduceResidualRMSNorm: one Lamport kernel, the two-shot kernel, or the all-reduce
// then the local norm. FC_ARNORM_ALGO ("fused" names the one kernel; "twoshot";
// "unfused").
enum class NormAlgo { Auto, OneKernel, TwoShot, Unfused };

// fcAllReduceResidualRMSNorm's resolved path: the one-kernel (Lamport one-shot), the
// two-shot kernel, or fcAllReduce's choice then the norm kernel.
enum class NormPath { OneKernel, TwoShot, Unfused };

// fcMatmulAllReduce and its residual + RMSNorm forms: the fused paths (the one decode
// kernel where the shape allows it, else the GEMM's reduce-scatter then an
// all-gather), the GEMM then the all-reduce, or that reduce-scatter on
// fcMatmulReduceScatter's persistent engine, or the decode engine where it takes the call.
// FC_MMAR_ALGO ("fused", "unfused", "engine", "decode").
enum class MatmulAllReduceAlgo { Auto, Fused, Unfused, Engine, Decode };

// fcMatmulAllReduce's resolved path: the one kernel (GEMV + Lamport pushes per tile),
// the GEMM then the all-reduce (+ norm), the reduce-scatter + all-gather, or the decode
// engine (the decode GEMM pushing its tiles into the peer's Lamport buffer, the all-reduce
// + RMSNorm kernel finishing, its sum stage only in the plain form; forced only:
// FC_MMAR_ALGO=decode).
enum class MatmulAllReducePath { OneKernel, AllReduce, ReduceScatterAllGather, DecodeEngine };

// The one decode kernel's product (fused/gemv_all_reduce.cu): CUDA-core FMAs or
// tensor-core MMAs. FC_GEMV_FORM ("auto", "fma": up to 4 rows, "mma").
enum class GemvForm { Auto, Fma, Mma };

// fcAllGatherMatmul's pipeline in passes (a shard beyond a workspace slot): how a pass's
// rows move. FC_AGMM_PASSES ("pull": staged in our slot, pulled by the peers; "push": into
// the peer's slot, our rows' GEMM and the peer's per pass; "push-own-first": pushed, our
// rows' GEMM whole in front of the peer's passes: the default, at most 1.016x torch
// symm_mem's time at 24576-32768 rows against push's 1.031, perf-log). The pushed forms at
// 2 ranks without Agathered only, the pulled one elsewhere.
enum class AgmmPasses { Pull, Push, PushOwnFirst };

}  // namespace fc
