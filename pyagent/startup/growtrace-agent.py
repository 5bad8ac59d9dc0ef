# growtrace CPython agent, Python half.
#
# Executed by sitecustomize.py (same folder) in a private module object that is never put in
# sys.modules; the file name has a '-' so it cannot be imported by name either. It:
#  - replaces functools.lru_cache by a copy of itself whose global `_lru_cache_wrapper` is
#    `factory` below: every lru_cache/cache created from now on gets a C probe (see
#    _growtrace_agent.c) as its function, so misses = insertions are reported, while
#    functools._lru_cache_wrapper stays the real C type (isinstance checks keep working);
#  - registers the caches that already exist (typing's, when a .pth imported it early);
#  - resolves the names a cache is bound to when it first misses;
#  - adds the gc callback that reports full collections and, unless the preload library hooks
#    PyType_Ready itself (shared-libpython builds), new classes;
#  - re-announces live caches in a forked child (it writes a trace of its own).
# Attached to a running process (`growtrace attach`, attached=True) it instead probes the
# caches that exist (their function is swapped for a probe in place), catches new ones at the
# wrapper type's constructor, names them from every loaded module, and returns `detach`, which
# undoes all of it.
# Nothing here may run the program's code or change what the program observes, apart
# from `functools.lru_cache` being an equivalent function object, one gc.callbacks entry, and
# one full collection (gc.collect()) at the start of shutdown when the collector is enabled.

# The flag values of pyagent/include/growtrace_py_api.h, which
# tests/unit/contracts_test.cpp holds these to.
FEATURE_NATIVE_TYPE_HOOK = 1
CACHE_TYPED = 1
CACHE_PREEXISTING = 2
CACHE_METHOD = 4


def install(ext, log_path, agent_path, api=0, attached=False):
    import sys
    import gc
    import _weakref
    import functools

    features = ext.start(gc.get_objects, log_path, agent_path, api)
    if features < 0:
        return None  # no preload library and no log file: stay out of the way
    active = True

    # Registered first, so it runs last of the program's atexit callbacks: the state the
    # program leaves behind is measured before the interpreter frees it all.
    import atexit
    atexit.register(ext.process_exiting)
    scans_types = not features & FEATURE_NATIVE_TYPE_HOOK
    if scans_types:
        ext.enable_type_scan()
        atexit.register(ext.type_scan_final)  # runs before process_exiting (LIFO)

    real_wrapper = functools._lru_cache_wrapper
    functools_globals = functools.__dict__
    logging = log_path is not None
    module_type = type(sys)
    live = {}  # cache_id -> (weakref to wrapper, CacheCreate fields, bound names or None)
    patched_globals = dict(functools_globals)  # globals of the patched lru_cache, see below

    def frames_text(frame, limit=32):
        out = []
        while frame is not None and len(out) < limit:
            code = frame.f_code
            out.append(f"{code.co_filename}:{frame.f_lineno}:{getattr(code, 'co_qualname', code.co_name)}")
            frame = frame.f_back
        return out

    def describe_callable(fn):
        # __module__/__qualname__ of functions and classes are plain attributes.
        try:
            module = fn.__module__
            qualname = fn.__qualname__
        except Exception:
            module, qualname = None, None
        if not isinstance(module, str):
            module = ""
        if not isinstance(qualname, str):
            qualname = type(fn).__qualname__
        return module, qualname

    def find_bindings(wrapper, module_names):
        names, is_method = [], False
        for _module_name, name, value, method in module_bindings(sys, module_type, module_names, False):
            if value is wrapper:
                names.append(name)
                is_method |= method
        seen = set()
        return [n for n in names if not (n in seen or seen.add(n))], is_method

    def announce(cache_id):
        # Emits (again) the CacheCreate of a live cache; resolves its names the first time.
        # `live` holds the wrapper weakly: the agent must never keep a cache alive.
        entry = live.get(cache_id)
        if entry is None:
            return
        ref, args, names = entry
        wrapper = ref()
        if wrapper is None:
            return
        (cache_dict, maxsize, flags, stack_id, module, qualname,
         creator_module, creator_file, creator_line, creation_stack) = args
        if names is None:
            names, is_method = find_bindings(wrapper, dict.fromkeys([creator_module, module]))
            if is_method:
                flags |= CACHE_METHOD
                args = (cache_dict, maxsize, flags) + args[3:]
            live[cache_id] = (ref, args, names)
        ext.cache_created(cache_id, wrapper, cache_dict, maxsize, flags, stack_id, module,
                          qualname, creator_module, creator_file, creator_line,
                          "\0".join(names), creation_stack)

    cache_destroyed = ext.cache_destroyed  # bound now: module dicts are cleared at exit

    def on_destroy(cache_id):
        def callback(_ref, cache_id=cache_id):
            try:
                if live.pop(cache_id, None) is not None:
                    cache_destroyed(cache_id)
            except Exception:
                pass
        return callback

    def on_first_miss(probe):
        announce(probe.cache_id)

    own_globals = globals()

    def creator_frame():
        # The first frame that is neither ours nor functools' (decorating_function,
        # lru_cache, cache).
        frame = sys._getframe(1)
        while frame is not None and (frame.f_globals is own_globals or frame.f_globals is patched_globals
                                     or frame.f_globals is functools_globals):
            frame = frame.f_back
        return frame

    def register(wrapper, probe, cache_dict, user_function, maxsize, typed):
        try:
            ext.attach_probe(probe, cache_dict)
            frame = creator_frame()
            creator_module = frame.f_globals.get("__name__", "") if frame is not None else ""
            creator_file = frame.f_code.co_filename if frame is not None else ""
            creator_line = frame.f_lineno if frame is not None else 0
            module, qualname = describe_callable(user_function)
            stack_id = ext.capture_stack()
            creation_stack = frames_text(frame) if logging else None
            flags = CACHE_TYPED if typed else 0
            args = (cache_dict, -1 if maxsize is None or maxsize < 0 else maxsize, flags, stack_id,
                    module, qualname, creator_module if isinstance(creator_module, str) else "",
                    creator_file, creator_line or 0, creation_stack)
            cache_id = probe.cache_id
            live[cache_id] = (_weakref.ref(wrapper, on_destroy(cache_id)), args, None)
        except Exception:
            pass  # never break the program's decorator

    def factory(user_function, maxsize, typed, cache_info_type):
        if not active:
            return real_wrapper(user_function, maxsize, typed, cache_info_type)
        probe = ext.make_probe(user_function, on_first_miss)
        wrapper = real_wrapper(probe, maxsize, typed, cache_info_type)
        try:
            # Before update_wrapper runs the wrapper has no __dict__: its only dict referent
            # is the cache.
            cache_dict = next(r for r in gc.get_referents(wrapper) if type(r) is dict)
        except Exception:
            return wrapper
        register(wrapper, probe, cache_dict, user_function, maxsize, typed)
        return wrapper

    # Caches created before the agent: registered now, without creation stack; probed too
    # when attached (otherwise they were made before `site` ran: typing's and re's).
    bindings = binding_index(sys, module_type, real_wrapper) if attached else None
    for obj in gc.get_objects():
        if type(obj) is not real_wrapper:
            continue
        try:
            own_dict = obj.__dict__
            cache_dict = next(r for r in gc.get_referents(obj) if type(r) is dict and r is not own_dict)
            info = obj.cache_info()
            params = own_dict.get("cache_parameters")
            typed = bool(params()["typed"]) if callable(params) else False
            fn = own_dict.get("__wrapped__", obj)
            module, qualname = describe_callable(fn)
            maxsize = -1 if info.maxsize is None else info.maxsize
            flags = CACHE_PREEXISTING | (CACHE_TYPED if typed else 0)
            creator = (module, "", 0)
            names = None
            adopted = ext.adopt_cache(obj) if attached else None
            if adopted is not None:
                probe, cache_dict = adopted
                cache_id = probe.cache_id
                names, is_method, creator = where_bound(bindings.get(id(obj), ()), fn, creator)
                if is_method:
                    flags |= CACHE_METHOD
            else:
                cache_id = ext.new_cache_id()
            live[cache_id] = (_weakref.ref(obj, on_destroy(cache_id)),
                              (cache_dict, maxsize, flags, 0, module, qualname) + creator + (None,),
                              names)
            announce(cache_id)
        except Exception:
            continue

    if attached:
        def on_new_cache(wrapper, probe, cache_dict, user_function, maxsize, typed):
            register(wrapper, probe, cache_dict, user_function, maxsize, typed)

        ext.hook_new_caches(real_wrapper, on_new_cache, on_first_miss)
        gc.callbacks.append(ext.gc_callback)

        def detach():
            # Everything install() changed, put back; under the GIL, called by the library.
            nonlocal active
            active = False
            ext.unhook_new_caches()
            if scans_types:
                ext.type_scan_final()
                atexit.unregister(ext.type_scan_final)
            try:
                gc.callbacks.remove(ext.gc_callback)
            except ValueError:
                pass  # the program emptied gc.callbacks
            atexit.unregister(ext.process_exiting)
            for ref, _args, _names in list(live.values()):
                wrapper = ref()
                if wrapper is not None:
                    ext.release_cache(wrapper)
            live.clear()
            ext.stop()

        return detach

    # functools.lru_cache with `_lru_cache_wrapper` resolved to the factory.
    original = functools.lru_cache
    patched_globals["_lru_cache_wrapper"] = factory
    patched = type(original)(original.__code__, patched_globals, original.__name__,
                             original.__defaults__, original.__closure__)
    patched.__kwdefaults__ = original.__kwdefaults__
    patched.__qualname__ = original.__qualname__
    patched.__doc__ = original.__doc__
    patched.__module__ = original.__module__
    patched.__dict__.update(original.__dict__)
    functools.lru_cache = patched

    # Reports full collections (and, with scans_types, new classes). A program that empties
    # gc.callbacks only loses those reports; the collection at the shutdown mark reports itself.
    gc.callbacks.append(ext.gc_callback)

    def after_fork_in_child():
        if not active:
            return
        for cache_id, (_ref, _args, names) in list(live.items()):
            if names is not None:  # announced in the parent
                announce(cache_id)

    import os
    os.register_at_fork(after_in_child=after_fork_in_child)
    return features


def module_bindings(sys, module_type, module_names, own_classes_only):
    # (module name, "module.name" or "module.Class.name", value, is_method) for every global of
    # the named loaded modules and every attribute of the classes among them, read from their
    # dicts (no descriptor or __getattr__ runs). own_classes_only: a class counts only in the
    # module that defines it, not everywhere it is imported.
    for module_name in module_names:
        module = sys.modules.get(module_name)
        if module is None or not isinstance(module, module_type):
            continue
        try:
            items = list(module.__dict__.items())
        except Exception:
            continue
        for key, value in items:
            yield module_name, f"{module_name}.{key}", value, False
            if not issubclass(type(value), type):
                continue
            try:
                attrs = type.__dict__["__dict__"].__get__(value)
                if own_classes_only and attrs.get("__module__") != module_name:
                    continue
                owner = type.__dict__["__qualname__"].__get__(value)
                attrs = list(attrs.items())
            except Exception:
                continue
            for attr, attr_value in attrs:
                yield module_name, f"{module_name}.{owner}.{attr}", attr_value, True


def binding_index(sys, module_type, wrapper_type):
    # id(wrapper) -> [(module name, qualified name, is_method)] over every loaded module in one
    # pass: an attached agent does not know who created a cache.
    index = {}
    for module_name, name, value, is_method in module_bindings(sys, module_type, list(sys.modules), True):
        if type(value) is wrapper_type:
            index.setdefault(id(value), []).append((module_name, name, is_method))
    return index


def where_bound(bindings, fn, fallback):
    # (names, is_method, (creator module, file, line)) of a cache found already made. The
    # creator is the module whose source assigns (or defines) the name, so that an import
    # elsewhere (`from openai._models import _CachedTypeAdapter`) is not taken for it; a
    # decorated function's code object knows its file and first line (the decorator's).
    import sys
    code = getattr(fn, "__code__", None) if type(fn).__name__ == "function" else None
    chosen = None
    for module_name, name, _is_method in bindings:
        module = sys.modules.get(module_name)
        filename = module_file(module)
        if not isinstance(filename, str):
            continue
        if code is not None and code.co_filename == filename:
            chosen = (module_name, filename, code.co_firstlineno)
            break
        line = assignment_line(filename, name.rsplit(".", 1)[1])
        if line:
            chosen = (module_name, filename, line)
            break
    if chosen is None and bindings:
        module = sys.modules.get(bindings[0][0])
        filename = module_file(module)
        chosen = (bindings[0][0], filename if isinstance(filename, str) else "", 0)
    if chosen is None:
        return [], False, fallback
    names = [name for module_name, name, _ in bindings if module_name == chosen[0]]
    is_method = any(m for module_name, _, m in bindings if module_name == chosen[0])
    return names, is_method, chosen


def module_file(module):
    # From the module's own dict: getattr would run a module-level __getattr__ (PEP 562).
    try:
        return type(module).__dict__["__dict__"].__get__(module).get("__file__") if module is not None else None
    except Exception:
        return None


def assignment_line(filename, name):
    # First line of the file that binds `name` at any indentation: `name = ...`,
    # `name: T = ...` or `def name(`. 0 if none (or the source is not there).
    try:
        with open(filename, encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, 1):
                text = line.lstrip()
                if text.startswith(("def " + name + "(", "async def " + name + "(")):
                    return number
                if not text.startswith(name):
                    continue
                rest = text[len(name):].lstrip()
                if (rest.startswith("=") and not rest.startswith("==")) or rest.startswith(":"):
                    return number
    except (OSError, ValueError):
        pass
    return 0
