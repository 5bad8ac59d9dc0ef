// PEP 445 hooks on CPython's object and "mem" allocator domains. Objects that pymalloc serves
// never reach malloc, so without these most Python memory would be invisible. The hooks wrap
// whatever allocator is installed (pymalloc, malloc, debug hooks) and record each block with
// its Python stack only: no native unwinding for the most frequent allocations in a Python
// program, which is what keeps their cost low.
#pragma once

namespace growtrace::preload::python {

// Installs the hooks if the interpreter is initialised and the calling thread holds the GIL
// (swapping allocators is only safe then). Returns true once installed; cheap afterwards.
bool install_allocator_hooks();

// `growtrace run --no-python-objects`: never install them (objects pymalloc serves are then
// seen only as the arenas it takes from malloc).
void allow_allocator_hooks(bool allowed);

}  // namespace growtrace::preload::python

namespace growtrace::preload::python {

// Puts back the allocators the hooks wrap (detach). GIL held. Blocks the hooks allocated are
// the wrapped allocator's own, so they are freed correctly afterwards. Left in place if
// someone installed another hook over ours since (it would still call ours: harmless).
void uninstall_allocator_hooks();

}  // namespace growtrace::preload::python
