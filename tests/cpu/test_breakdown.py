"""fusedcomm.breakdown without torch (tools/bench-model --breakdown's arithmetic): the
rule table on kernel names as the profiler reports them (ours from src/, cuBLAS,
CUTLASS, NCCL, PyTorch's attention and elementwise kernels, inductor's, torch
symm_mem's), the split of a window into parts on a synthetic trace (overlap, clipping,
idle = the window minus the union of GPU activity), the rows' excess over the fastest
bound, and the verdict: where ours misses its target, which part takes the difference."""
import io
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "python"))
from fusedcomm import breakdown as B  # noqa: E402

failures = []


def expect(cond, what):
    print("%-78s %s" % (what, "OK" if cond else "FAIL"))
    if not cond:
        failures.append(what)


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol


# ---- the rule table ------------------------------------------------------------------
# Names as the profiler's trace gives them (demangled). Ours follow src/ (grep __global__;
# the engine's kernels are CUTLASS GemmUniversal instantiations with fc::engine types).
NAMES = {
    # cuBLAS / cuBLASLt on Hopper, CUTLASS, inductor's template GEMM
    "nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNN": "gemm",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_"
    "kernel__5x_cublas": "gemm",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)": "gemm",
    "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStrided<__nv_bfloat16 const>, cublasGemvTensorStrided<__nv_bfloat16 "
    "const>, cublasGemvTensorStrided<__nv_bfloat16>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStrided<"
    "__nv_bfloat16 const>, cublasGemvTensorStrided<__nv_bfloat16 const>, cublasGemvTensorStrided<__nv_bfloat16>, "
    "float>, float, float)": "gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>"
    "(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, "
    "float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)": "gemm",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedCooperative<4, "
    "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>>, "
    "cutlass::epilogue::collective::CollectiveEpilogue<>, cutlass::gemm::PersistentScheduler, void> >"
    "(cutlass::gemm::kernel::GemmUniversal<>::Params)": "gemm",
    "triton_tem_fused_mm_3": "gemm",
    # ours, GEMM + communication in one kernel (src/gemm/engine, src/fused/gemv_all_reduce.cu)
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "fc::engine::OwnRowsMainloop<cutlass::gemm::collective::CollectiveMma<>>, "
    "cutlass::epilogue::collective::CollectiveEpilogue<>, fc::engine::ReadinessSchedulerTag, void> >"
    "(cutlass::gemm::kernel::GemmUniversal<>::Params)": "fused",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "fc::engine::OwnRowsMainloop<cutlass::gemm::collective::CollectiveMma<>>, fc::engine::TileSignalEpilogue<"
    "fc::engine::OwnBlockEpilogue<>>, fc::engine::ScatterSchedulerTag<true>, void> >(Params)": "fused",
    "void fc::(anonymous namespace)::gemvAllReduceKernel<__nv_bfloat16, 2, 1>(fc::DeviceComm, int, __nv_bfloat16 "
    "const*, __nv_bfloat16 const*, void*, bool, int, int, int, int, int, unsigned int)": "fused",
    # communication: NCCL, our collectives (src/collectives, src/fused), torch symm_mem, P2P copies
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "void fc::(anonymous namespace)::allReduceNormLamportKernel<__nv_bfloat16, 2>(fc::DeviceComm, int, "
    "fc::NormCall, unsigned int, unsigned int)": "communication",
    "void fc::(anonymous namespace)::allReduceNormTwoShotKernel<__nv_bfloat16, 2>(fc::DeviceComm, int, "
    "fc::NormCall, unsigned long, unsigned int)": "communication",
    "void fc::(anonymous namespace)::allReduceLamportKernel<__nv_bfloat16, 2>(fc::DeviceComm, int, "
    "__nv_bfloat16 const*, __nv_bfloat16*, unsigned long, unsigned int, unsigned int)": "communication",
    "void fc::(anonymous namespace)::allReduceOneShotKernel<__nv_bfloat16, 2>(fc::DeviceComm, int, "
    "__nv_bfloat16 const*, __nv_bfloat16*, unsigned long, fc::SymSource, bool, unsigned int)": "communication",
    "void fc::(anonymous namespace)::lamportMoveKernel<__nv_bfloat16, (fc::Move)0, 2>(fc::DeviceComm, int, "
    "__nv_bfloat16 const*, __nv_bfloat16*, unsigned long, unsigned int)": "communication",
    "void fc::(anonymous namespace)::reduceScatterKernel<__nv_bfloat16, 2>(fc::DeviceComm, int, ...)":
        "communication",
    "void fc::(anonymous namespace)::allGatherKernel<__nv_bfloat16>(fc::DeviceComm, int, ...)": "communication",
    "fc::(anonymous namespace)::barrierKernel(fc::DeviceComm, int, fc::Op, unsigned int, bool)": "communication",
    "fc::(anonymous namespace)::gateKernel(fc::DeviceComm, int, fc::Op, fc::WaitKind, unsigned int const*, "
    "unsigned int, int)": "communication",
    "void fc::(anonymous namespace)::reducePartialsKernel<float, __nv_bfloat16>(float const*, float const*, "
    "unsigned long, int, __nv_bfloat16*, unsigned long, bool)": "communication",
    "void fc::(anonymous namespace)::localReduceKernel<__nv_bfloat16, 2>(...)": "communication",
    "void c10d::symmetric_memory::barrier_kernel(unsigned int**, unsigned long, int, int)": "communication",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 16, 2>(...)": "communication",
    "Memcpy PtoP (Device -> Device)": "communication",
    # attention: flash (PyTorch's, cuDNN's), memory-efficient, the math path's softmax
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, "
    "true, true, false, false>(pytorch_flash::Flash_fwd_params)": "attention",
    "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>, 4, 3, true>"
    "(pytorch_flash::Flash_fwd_params)": "attention",
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
    "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0": "attention",
    "void (anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
    "(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)": "attention",
    # norm: ours after an all-reduce, PyTorch's, inductor's fused add + RMSNorm
    "void fc::(anonymous namespace)::residualNormKernel<__nv_bfloat16, float>(fc::NormCall, float const*)": "norm",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
    "c10::BFloat16*)": "norm",
    "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0": "norm",
    # other: residual adds, rotary embedding, SwiGLU, copies
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)": "other",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(...)": "other",
    "triton_poi_fused_add_cat_mul_neg_1": "other",
    "triton_poi_fused_mul_silu_2": "other",
    # inductor names a fused kernel after the ops it reads too (2 H200s, 83396d6): SwiGLU on
    # our fused op's output, SwiGLU before a reduce-scatter, the rotary embedding before attention
    "triton_poi_fused_matmul_all_reduce_residual_rmsnorm_mul_silu_split_2": "other",
    "triton_poi_fused_matmul_reduce_scatter_mul_silu_split_3": "other",
    "triton_poi_fused__scaled_dot_product_cudnn_attention_add_cat_mul_neg_slice_split_with_sizes_transpose_0": "other",
    "triton_tem_fused_mm_0": "gemm",
    # the engine as the profiler named it (mangled) in a 2-H200 run (2977d3e)
    "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIN4cute5tupleIJiiiiEEEN2fc6engine15"
    "OwnRowsMainloopINS": "fused",
    "Memcpy DtoD (Device -> Device)": "other",
    "Memset (Device)": "other",
}
for name, part in NAMES.items():
    got = B.classify(name)
    expect(got == part, "%-13s <- %s%s" % (part, name[:48], "" if got == part else " (got %s)" % got))
# A bound has no communication: our fused residual + RMSNorm on a 1-rank communicator is its norm.
lamport_norm = "void fc::(anonymous namespace)::allReduceNormLamportKernel<__nv_bfloat16, 1>(fc::DeviceComm, int)"
expect(B.classify(lamport_norm, bound=True) == "norm", "a bound's all-reduce + RMSNorm kernel counts as norm")
expect(B.classify("ncclDevKernel_AllReduce_Sum_bf16_RING_LL()", bound=True) == "communication",
       "a bound's NCCL kernel stays communication")
expect(set(B.PRIORITY) | {"idle"} == set(B.PARTS), "every part but idle has a priority")

# ---- the split of a window -------------------------------------------------------------
# Window [100, 200). GEMM [105, 135) with a P2P copy [120, 150) under and after it: the
# copy counts only where it is exposed (135-150). A norm kernel [150, 160); a kernel
# straddling the end [190, 230) clipped to 190-200; one before the window (a barrier's
# NCCL kernel) left out. Idle: 100-105, 160-190 = 35 us.
acts = [("nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNN", 105.0, 135.0),
        ("Memcpy PtoP (Device -> Device)", 120.0, 150.0),
        ("void fc::(anonymous namespace)::residualNormKernel<__nv_bfloat16, float>()", 150.0, 160.0),
        ("triton_poi_fused_mul_silu_2", 190.0, 230.0),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL()", 80.0, 99.0)]
s = B.split(acts, 100.0, 200.0)
u = s["us"]
expect((u["gemm"], u["communication"], u["norm"], u["other"], u["idle"]) == (30.0, 15.0, 10.0, 10.0, 35.0),
       "split: gemm 30, exposed communication 15, norm 10, other 10 (clipped), idle 35")
expect(close(sum(u.values()), 100.0), "split: the parts sum to the window")
expect(s["kernel_us"]["communication"] == 30.0 and s["kernels"]["communication"] == 1,
       "split: kernel_us keeps the copy's whole time (overlap included)")
expect(s["kernels"]["other"] == 1 and sum(s["kernels"].values()) == 4, "split: the kernel before the window left out")
expect(s["top"]["gemm"][0] == ["nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNN", 30.0], "split: the largest kernels named")
# Idle is the window minus the union of GPU activity: two overlapping GEMMs on two streams
# [10, 40) and [30, 60) and a fused kernel [50, 70) over them: busy 10-70 (60 us), the fused
# kernel first where it runs.
s = B.split([("nvjet_a", 10, 40), ("nvjet_b", 30, 60), ("fc::engine::x", 50, 70)], 0, 100)["us"]
expect((s["gemm"], s["fused"], s["idle"]) == (40, 20, 40), "split: union of overlapping kernels, fused first")
expect(B.split([], 0, 50)["us"]["idle"] == 50, "split: an empty window is idle")
p = B.per_step(B.split(acts, 100.0, 200.0), 4)
expect(p["us"]["gemm"] == 7.5 and p["wall"] == 25.0 and p["kernels"]["gemm"] == 0.25, "per step: divided by calls")

# ---- the trace's events ----------------------------------------------------------------
events = [{"ph": "X", "cat": "user_annotation", "name": B.WINDOW + "fc", "ts": 100.0, "dur": 100.0},
          {"ph": "X", "cat": "gpu_user_annotation", "name": B.WINDOW + "fc", "ts": 105.0, "dur": 90.0},
          {"ph": "X", "cat": "user_annotation", "name": "something else", "ts": 0, "dur": 1},
          {"ph": "X", "cat": "kernel", "name": "nvjet_x", "ts": 105.0, "dur": 30.0},
          {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "ts": 120.0, "dur": 30.0},
          {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 150.0, "dur": 1.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 101.0, "dur": 3.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 102.0, "dur": 1.0},
          {"ph": "M", "name": "process_name"}]
expect(B.windows(events) == {"fc": (100.0, 200.0)}, "trace: the window is the CPU range, by its prefix")
expect([a[0] for a in B.gpu_activities(events)] == ["nvjet_x", "Memcpy PtoP (Device -> Device)", "Memset (Device)"],
       "trace: kernels, memcpys and memsets are GPU activity; CPU ops and runtime calls are not")


# ---- rows, excess over the bound, verdicts -----------------------------------------------
def step(**us):
    parts = dict.fromkeys(B.PARTS, 0.0)
    parts.update(us)
    return dict(us=parts, kernel_us=dict.fromkeys(B.PRIORITY, 1.0), kernels=dict.fromkeys(B.PRIORITY, 2),
                wall=sum(parts.values()), top={})


records = [("prefill", 2048, 0, "nccl", step(gemm=800, communication=150, norm=40, other=30, idle=20), "eager"),
           ("prefill", 2048, 0, "fc", step(gemm=800, communication=60, norm=5, other=25, idle=20), "eager"),
           ("prefill", 2048, 0, "bound", step(gemm=800, norm=40, other=30, idle=20), "eager"),
           ("prefill", 2048, 0, "bound-sp", step(gemm=820, norm=20, other=30, idle=20), "eager"),
           ("decode", 1, 2048, "fc", step(fused=50, norm=5, gemm=300, attention=50, idle=5), "graph"),
           ("decode", 1, 2048, "bound-fc", step(gemm=340, norm=10, attention=50, idle=5), "graph")]
timed = {("prefill", 2048, "nccl"): 1045.0, ("prefill", 2048, "fc"): 912.0, ("prefill", 2048, "bound"): 885.0,
         ("prefill", 2048, "bound-sp"): 895.0, ("decode", 1, "fc"): 415.0, ("decode", 1, "bound-fc"): 400.0}
base = dict(preset="llama3-8b", hidden=4096, intermediate=14336, layers=4, tp_shapes=2, ranks=2)
rows = B.rows(records, timed, base)
expect(len(rows) == len(records) * len(B.PARTS), "rows: one per variant and part")
r = {(x["phase"], x["variant"], x["part"]): x for x in rows}
expect(r[("prefill", "fc", "communication")]["excess_us"] == 60.0
       and r[("prefill", "fc", "norm")]["excess_us"] == -35.0,
       "rows: excess = the part's time - the fastest bound's (bound, not bound-sp)")
expect(r[("prefill", "fc", "gemm")]["bound"] == "bound" and r[("prefill", "bound-sp", "gemm")]["excess_us"] == "",
       "rows: the bound named; bounds have no excess")
expect(r[("prefill", "fc", "idle")]["kernel_us"] == "" and r[("prefill", "fc", "gemm")]["step_us"] == 912.0,
       "rows: idle has no kernels; the timed step beside the profiled one")
expect(all(set(B.FIELDS) <= set(x) for x in rows), "rows: every CSV field")
# The timed rows of tools/bench-model (strings, as tools/report reads them back).
timed_rows = [dict(phase=p, tokens=str(n), variant=v, step_us=str(t)) for (p, n, v), t in timed.items()]
timed_rows.append(dict(phase="decode", tokens="8", variant="fc", step_us="420.0"))
timed_rows.append(dict(phase="decode", tokens="8", variant="bound-fc", step_us="400.0"))
vs = {(v["phase"], v["tokens"]): v for v in B.verdicts(timed_rows, [{k: str(x) for k, x in row.items()}
                                                                    for row in rows])}
p = vs[("prefill", 2048)]
expect(p["ours"] == "fc" and close(p["ratio"], 912 / 885) and not p["missed"], "verdict: prefill 1.031x, met (1.05)")
d = vs[("decode", 1)]
expect(d["missed"] and d["part"] == "gemm+fused" and d["excess"]["gemm+fused"] == 10.0 and "fused" not in d["excess"],
       "verdict: decode 1.0375x missed (1.03); the fused kernel's time over the GEMM it replaces takes it")
expect(d["excess"]["norm"] == -5.0 and list(d["excess"])[0] == "gemm+fused", "verdict: the other parts' excess")
expect(close(d["profiled_diff"], 410 - 405) and d["timed_diff"] == 15.0, "verdict: profiled and timed differences")
expect(vs[("decode", 8)]["missed"] and not vs[("decode", 8)]["profiled"], "verdict: a miss not profiled says so")
expect("not profiled" in B.difference_text(vs[("decode", 8)]), "verdict text: not profiled")
out = io.StringIO()
B.print_table(rows, timed_rows, out)
text = out.getvalue()
expect("breakdown: prefill 2048" in text and "breakdown: decode 1" in text, "table: a block per profiled workload")
expect("decode 1: fc 1.038x bound-fc; gemm+fused +10.0 us (the largest), norm -5.0; in all +5.0 us over "
       "bound-fc profiled, +15.0 timed" in text, "table: which part takes the difference")
expect("decode 8: fc 1.050x bound-fc; not profiled" in text and "prefill 2048: fc" not in text,
       "table: only the misses listed")

if failures and os.environ.get("VERBOSE"):
    print(text)
print("FAILED: %s" % ", ".join(failures) if failures else "all breakdown checks passed")
sys.exit(1 if failures else 0)
