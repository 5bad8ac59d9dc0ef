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
#  - adds the gc callback that reports new classes, unless the preload library hooks
#    PyType_Ready itself (shared-libpython builds);
#  - re-announces live caches in a forked child (it writes a trace of its own).
# Nothing here may run the program's code or change what the program observes, apart
# from `functools.lru_cache` being an equivalent function object and one gc.callbacks entry.

FEATURE_NATIVE_TYPE_HOOK = 1
CACHE_TYPED = 1
CACHE_PREEXISTING = 2
CACHE_METHOD = 4


def install(ext, log_path, agent_path):
    import sys
    import gc
    import _weakref
    import functools

    features = ext.start(gc.get_objects, log_path, agent_path)
    if features < 0:
        return None  # no preload library and no log file: stay out of the way

    # Registered first, so it runs last of the program's atexit callbacks: the state the
    # program leaves behind is measured before the interpreter frees it all.
    import atexit
    atexit.register(ext.process_exiting)

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
            out.append(f"{code.co_filename}:{frame.f_lineno}:{code.co_qualname}")
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
        for module_name in module_names:
            module = sys.modules.get(module_name)
            if module is None or not isinstance(module, module_type):
                continue
            try:
                items = list(module.__dict__.items())
            except Exception:
                continue
            for key, value in items:
                if value is wrapper:
                    names.append(f"{module_name}.{key}")
                elif issubclass(type(value), type):
                    try:
                        attrs = list(type.__dict__["__dict__"].__get__(value).items())
                        owner = type.__dict__["__qualname__"].__get__(value)
                    except Exception:
                        continue
                    for attr, attr_value in attrs:
                        if attr_value is wrapper:
                            names.append(f"{module_name}.{owner}.{attr}")
                            is_method = True
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

    def factory(user_function, maxsize, typed, cache_info_type):
        probe = ext.make_probe(user_function, on_first_miss)
        wrapper = real_wrapper(probe, maxsize, typed, cache_info_type)
        try:
            # Before update_wrapper runs the wrapper has no __dict__: its only dict referent
            # is the cache.
            cache_dict = next(r for r in gc.get_referents(wrapper) if type(r) is dict)
            ext.attach_probe(probe, cache_dict)
            frame = sys._getframe(1)
            while frame is not None and (frame.f_globals is patched_globals
                                         or frame.f_globals is functools_globals):
                frame = frame.f_back  # decorating_function, lru_cache, cache
            creator_module = frame.f_globals.get("__name__", "") if frame is not None else ""
            creator_file = frame.f_code.co_filename if frame is not None else ""
            creator_line = frame.f_lineno if frame is not None else 0
            module, qualname = describe_callable(user_function)
            stack_id = ext.capture_stack()
            creation_stack = frames_text(frame) if logging else None
            flags = CACHE_TYPED if typed else 0
            args = (cache_dict, -1 if maxsize is None else max(maxsize, 0), flags, stack_id,
                    module, qualname, creator_module if isinstance(creator_module, str) else "",
                    creator_file, creator_line or 0, creation_stack)
            cache_id = probe.cache_id
            live[cache_id] = (_weakref.ref(wrapper, on_destroy(cache_id)), args, None)
        except Exception:
            pass  # never break the program's decorator
        return wrapper

    # Caches created before the agent: registered now, without probe or creation stack.
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
            cache_id = ext.new_cache_id()
            maxsize = -1 if info.maxsize is None else info.maxsize
            flags = CACHE_PREEXISTING | (CACHE_TYPED if typed else 0)
            live[cache_id] = (_weakref.ref(obj, on_destroy(cache_id)),
                              (cache_dict, maxsize, flags, 0, module, qualname, module, "", 0, None),
                              None)
            announce(cache_id)
        except Exception:
            continue

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

    if not features & FEATURE_NATIVE_TYPE_HOOK:
        gc.callbacks.append(ext.gc_callback)

    def after_fork_in_child():
        for cache_id, (_ref, _args, names) in list(live.items()):
            if names is not None:  # announced in the parent
                announce(cache_id)

    import os
    os.register_at_fork(after_in_child=after_fork_in_child)
    return features
