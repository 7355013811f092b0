// The decode engine's epilogue (decode_gemm.h, DecodeGemm::push): the decode GEMM's
// stock TMA epilogue, whose fusion also stores each tile, by TMA from the same shared
// memory, into the peer's Lamport Rows slot of the current buffer (collectives/
// lamport.cuh, set 3): the peer's all-reduce + RMSNorm kernel, launched without its push
// stage, polls those packs as if its own kernel on our rank had pushed them.
//
// The values: each element rounded once to the input type (D's value, as the GEMM alone
// rounds it), then an all-ones element (a NaN) replaced by another NaN, so that no 32-bit
// word of a pack is the Lamport empty word (lamport.cuh, notEmpty). D, our own partial,
// holds the same values: the finisher sums it with the peer's in rank order.
//
// The buffer: the Rows kind's buffer index is device state (the rank's Rows word, moved
// on by the last CTA of every Rows kernel), and a TMA descriptor's base is fixed when the
// kernel is launched. So the epilogue holds one stock epilogue per buffer, over the same
// shared memory and pipelines (as the engine's OwnBlockEpilogue holds two), whose
// parameters differ only in the push's base, and each tile's store takes the one the
// index names. The index does not change while the GEMM runs: the GEMM is launched
// without PDL, so every Rows kernel before it has ended, and the finisher that moves it
// on waits for the GEMM's grid first.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>

#include <cstdint>
#include <utility>

namespace fc::decode {

// An all-ones 16-bit element (a NaN) becomes 0x7fff (a NaN too), elementwise over a
// fragment of the input type.
template <class Element>
struct NotEmptyElements {
  template <class Fragment>
  struct Fn {
    CUTLASS_HOST_DEVICE Fragment operator()(Fragment const& x) const {
      Fragment y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(Fragment::kElements); ++i) {
        const Element e = x[i];  // 16-bit arrays hand out references by proxy
        y[i] = e.raw() == uint16_t(0xffff) ? Element::bitcast(uint16_t(0x7fff)) : e;
      }
      return y;
    }
  };
};

// D = notEmpty(round(acc)), also stored (CUTLASS's auxiliary store) into a second tensor
// of D's layout: the peer's slot.
template <class Element, class TileShape, class EpilogueSchedule, class LayoutD>
struct PushFusionOf {
  using Descriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<
      TileShape, cutlass::epilogue::collective::EpilogueTileAuto, Element, Element, EpilogueSchedule>;
  using Aux = cutlass::epilogue::collective::detail::AuxStoreDescriptor<Descriptor, LayoutD, Element>;
  using Round = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<cutlass::epilogue::thread::Identity, Element, float,
                                             cutlass::FloatRoundStyle::round_to_nearest>,
      cutlass::epilogue::fusion::Sm90AccFetch>;
  using NotEmpty = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<NotEmptyElements<Element>::template Fn, Element, Element,
                                             cutlass::FloatRoundStyle::round_to_nearest>,
      Round>;
  using type = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90AuxStore<Aux::Stages, typename Aux::EpilogueTile, Element,
                                              cutlass::FloatRoundStyle::round_to_nearest, typename Aux::Stride,
                                              typename Aux::SmemLayoutAtom, typename Aux::CopyOpR2S>,
      NotEmpty>;
  using Stride = typename Aux::Stride;
  static typename type::Arguments arguments(Element* push, Stride stride) { return {{{{}, {}}, {}}, {push, stride}}; }
};

// One stock epilogue per Lamport buffer (3); Base's own parameters are buffer 0's.
template <class Base>
class BufferedPushEpilogue : public Base {
 public:
  static constexpr int kBuffers = 3;

  struct Arguments : Base::Arguments {
    typename Base::Arguments buffer[kBuffers - 1];  // buffers 1 and 2
    const uint32_t* index = nullptr;                // the rank's Rows buffer index
  };

  struct Params : Base::Params {
    typename Base::Params buffer[kBuffers - 1];
    const uint32_t* index;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    for (int b = 0; b < kBuffers - 1; ++b)
      p.buffer[b] = Base::to_underlying_arguments(problem_shape, args.buffer[b], workspace);
    p.index = args.index;
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    Base::prefetch_tma_descriptors(p);
    for (int b = 0; b < kBuffers - 1; ++b) Base::prefetch_tma_descriptors(p.buffer[b]);
  }

  CUTLASS_HOST_DEVICE BufferedPushEpilogue(Params const& params, typename Base::TensorStorage& shared)
      : Base(params, shared), buffer1_(params.buffer[0], shared), buffer2_(params.buffer[1], shared), p_(params) {}

  // The consumers' epilogue of one tile, through the current buffer's instance. L2 read
  // (ld.global.cg): the word was last written by another kernel's CTA.
  template <class... Args>
  CUTLASS_DEVICE auto store(Args&&... args) {
    const uint32_t b = __ldcg(p_.index);
    if (b == 1) return buffer1_.store(std::forward<Args>(args)...);
    if (b == 2) return buffer2_.store(std::forward<Args>(args)...);
    return Base::store(std::forward<Args>(args)...);
  }

 private:
  Base buffer1_, buffer2_;
  Params const& p_;
};

}  // namespace fc::decode
