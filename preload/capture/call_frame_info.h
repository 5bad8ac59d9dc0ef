// The rule that unwinds one x86-64 frame, read from a loaded module's DWARF call frame
// information (.eh_frame_hdr and .eh_frame, which every ELF object that can carry an exception
// has). Only the rules that compilers emit for ordinary code are understood: the frame's
// canonical frame address (CFA) is rsp or rbp plus a constant, the return address and the
// caller's rbp are saved at constant offsets from it. Anything else (a DWARF expression, a
// signal frame, a CFA in another register) is Unsupported, and the caller unwinds that stack
// with libunwind instead.
#pragma once

#include <cstdint>

namespace growtrace::preload {

struct FrameRule {
    enum Kind : uint8_t { Unsupported, Step, Outermost };
    Kind kind = Unsupported;
    bool cfa_from_rbp = false;  // else from rsp
    bool rbp_saved = false;     // else the caller's rbp is the callee's
    int32_t cfa_offset = 0;
    int32_t rbp_offset = 0;  // from the CFA, where rbp_saved
    int32_t ra_offset = 0;   // from the CFA
};

// The rule at `address` (a return address minus one, or an exact instruction pointer) in the
// module whose .eh_frame_hdr is mapped at `eh_frame_hdr`. Reads only the module's mapped
// unwind sections; call with the module kept loaded (inside dl_iterate_phdr).
FrameRule find_frame_rule(const uint8_t* eh_frame_hdr, uintptr_t address);

// The same from a single FDE's and its CIE's bytes, for tests: the rule at `address` in a
// function starting at `function_begin`.
FrameRule rule_from_instructions(const uint8_t* cie_instructions, const uint8_t* cie_end,
                                 const uint8_t* fde_instructions, const uint8_t* fde_end, uint64_t code_align,
                                 int64_t data_align, uint64_t ra_register, uintptr_t function_begin,
                                 uintptr_t address);

}  // namespace growtrace::preload
