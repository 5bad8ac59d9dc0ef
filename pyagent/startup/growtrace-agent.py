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
#  - puts the gc callback that reports full collections and, unless the preload library hooks
#    PyType_Ready itself (shared-libpython builds), new classes, in the collector's own list,
#    out of the program's sight (gc.callbacks shows the program's entries only);
#  - re-announces live caches in a forked child (it writes a trace of its own).
# Attached to a running process (`growtrace attach`, attached=True) it instead probes the
# caches that exist (their function is swapped for a probe in place), catches new ones at the
# wrapper type's constructor, names them from every loaded module, and returns `detach`, which
# undoes all of it.
# Nothing here may run the program's code (the program's gc callbacks are called only where
# the collector would call them, on its behalf) or change what the program observes, apart
# from `functools.lru_cache` being an equivalent function object and one full collection
# (gc.collect()) at the start of shutdown when the collector is enabled.

# The flag values of contracts/growtrace_py_api.h, which
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

    walk = None
    if os_environ_flag("GROWTRACE_CONTAINERS", True):
        def excluded_ids():
            ids = {id(live), id(patched_globals)}
            for _ref, args, _names in list(live.values()):
                ids.add(id(args[0]))
            return ids
        walk = container_walker(ext, sys, gc, module_type, excluded_ids)
        ext.set_walker(walk, os_environ_float("GROWTRACE_CONTAINER_PERIOD", 0.25),
                       os_environ_float("GROWTRACE_CONTAINER_SHARE", 0.01))

        def last_walk(flags):
            # At exit or detach: a whole walk only when one is due, else the tracked containers'
            # modules (docs/containers.md). Its allocations are not the program's.
            whole = ext.walk_due()
            ext.set_walker(None)
            ext.own_work(walk, flags if whole else flags | WALK_TRACKED_ONLY)

        def final_walk():
            last_walk(WALK_FINAL)
        atexit.register(final_walk)  # before process_exiting (LIFO): the state left behind

    if attached:
        def on_new_cache(wrapper, probe, cache_dict, user_function, maxsize, typed):
            register(wrapper, probe, cache_dict, user_function, maxsize, typed)

        ext.hook_new_caches(real_wrapper, on_new_cache, on_first_miss)
        ext.take_gc_callbacks(gc)  # the program's gc.callbacks stay as they were (see below)

        def detach():
            # Everything install() changed, put back; under the GIL, called by the library.
            nonlocal active
            active = False
            ext.unhook_new_caches()
            if scans_types:
                ext.type_scan_final()
                atexit.unregister(ext.type_scan_final)
            ext.give_back_gc_callbacks(gc)
            atexit.unregister(ext.process_exiting)
            if walk is not None:
                atexit.unregister(final_walk)
                last_walk(0)  # a last measure of what grew while attached
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

    # Reports full collections (and, with scans_types, new classes) from the collector's own
    # list of callbacks, which the program no longer sees: gc.callbacks is bound to a list of
    # the program's entries that the agent's callback calls after its work, as the collector
    # would (_growtrace_agent.c, "gc.callbacks, unchanged as the program sees it"). So a
    # program sees the gc.callbacks it would untraced, and cannot remove the agent's callback.
    ext.take_gc_callbacks(gc)

    def after_fork_in_child():
        if not active:
            return
        for cache_id, (_ref, _args, names) in list(live.items()):
            if names is not None:  # announced in the parent
                announce(cache_id)

    import os
    os.register_at_fork(after_in_child=after_fork_in_child)
    return features


def os_environ_flag(name, default):
    import os
    value = os.environ.get(name)
    return default if value is None else value not in ("0", "", "no", "false")


def os_environ_float(name, default):
    import os
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


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


# Container walks (docs/containers.md): every so often, on a program thread, the agent measures
# the dicts, lists, sets and deques (and the `data` of weakref's dictionaries and sets) that a
# path from a module reaches, and, every HEAP_PASS_EVERY walks, the large ones in the whole
# heap that no such path reaches, named by what owns them. Each walk reports the big ones and
# every one it reported before. Nothing is held between walks but ids and names, no method of
# the program's objects is called (each container is read through its built-in type's own
# functions), and nothing raises into the program.
CONTAINER_FLOOR = 64         # entries below which a container is not worth reporting
HEAP_FLOOR = 256             # ... nor, for one no module path reaches, looking for its owner
MAX_NEW_PER_WALK = 32
MAX_TRACKED = 256
MAX_DEPTH = 3                # module global / class attribute / instance attribute or element / ...
MAX_KEY_TEXT = 60            # a key printed in a path ([...] when its repr is longer)
HEAP_PASS_EVERY = 1
NEWEST = 2                   # newest entries whose types (and blocks) each record names
WALK_HEAP_PASS = 1
WALK_FINAL = 2
WALK_TRACKED_ONLY = 4
KIND_DICT, KIND_LIST, KIND_SET, KIND_DEQUE = 1, 2, 3, 4
WEAK_KINDS = {("weakref", "WeakValueDictionary"): 5, ("weakref", "WeakKeyDictionary"): 6,
              ("_weakrefset", "WeakSet"): 7}


def base_kind(kind):
    # The built-in container holding the entries (a weakref wrapper's `data`).
    return kind if kind <= KIND_DEQUE else (KIND_SET if kind == 7 else KIND_DICT)


def container_walker(ext, sys, gc, module_type, excluded_ids):
    # Returns walk(flags=0): one walk, reported through ext.report_containers.
    import time
    from _collections import deque as deque_type
    HEAPTYPE = 1 << 9
    type_attrs = type.__dict__
    get_qualname = type_attrs["__qualname__"].__get__
    get_module = type_attrs["__module__"].__get__
    get_type_dict = type_attrs["__dict__"].__get__
    get_flags = type_attrs["__flags__"].__get__
    get_mro = type_attrs["__mro__"].__get__
    get_module_dict = module_type.__dict__["__dict__"].__get__
    getset_type = type(type_attrs["__dict__"])
    cell_type = type((lambda: walk).__closure__[0])
    function_type = type(container_walker)
    lengths = {KIND_DICT: dict.__len__, KIND_LIST: list.__len__, KIND_SET: set.__len__,
               KIND_DEQUE: deque_type.__len__}
    tracked = {}        # key (name, or ("heap", id)) -> container id
    homes = {}          # key of a tracked container a module path reaches -> that module's name
    heap_names = {}     # id of a container no module path reaches -> (name, owner type, kind)
    dict_getter = {}    # class -> its instances' __dict__ descriptor (None: none, or not plain)
    walks = [0]

    def type_name(t):
        try:
            module, qualname = get_module(t), get_qualname(t)
        except Exception:
            return "?"
        return qualname if module == "builtins" else f"{module}.{qualname}"

    def kind_of(t):
        if issubclass(t, dict):
            return KIND_DICT
        if issubclass(t, list):
            return KIND_LIST
        if issubclass(t, set):
            return KIND_SET
        if issubclass(t, deque_type):
            return KIND_DEQUE
        return 0

    SKIP, CLASS, INSTANCE = 0, 10, 11
    categories = {}     # type -> what a walk does with its instances (SKIP, a kind, CLASS, INSTANCE)

    def category_of(t):
        kind = kind_of(t)
        if kind:
            return kind
        if issubclass(t, type):
            return CLASS
        if issubclass(t, module_type) or not get_flags(t) & HEAPTYPE:
            return SKIP
        return INSTANCE

    def instance_dict(obj):
        # The instance's own __dict__, only through the C descriptor CPython gives classes.
        t = type(obj)
        getter = dict_getter.get(t, 0)
        if getter == 0:
            getter = None
            for base in get_mro(t):
                attr = get_type_dict(base).get("__dict__")
                if attr is not None:
                    getter = attr.__get__ if type(attr) is getset_type else None
                    break
            dict_getter[t] = getter
        if getter is None:
            return None
        d = getter(obj)
        return d if type(d) is dict else None

    def weak_kind(t):
        try:
            return WEAK_KINDS.get((get_module(t), get_qualname(t)), 0)
        except Exception:
            return 0

    def newest(obj, kind):
        # (key types, value types, newest objects), newest first; a dict keeps insertion order.
        keys, values, objects = [], [], []
        try:
            if kind == KIND_DICT:
                for i, (k, v) in enumerate(reversed(dict.items(obj))):
                    if i == NEWEST:
                        break
                    keys.append(type_name(type(k)))
                    values.append(type_name(type(v)))
                    objects += (k, v)
            elif kind == KIND_LIST:
                for v in reversed(list.__getitem__(obj, slice(-NEWEST, None))):
                    values.append(type_name(type(v)))
                    objects.append(v)
            elif kind == KIND_DEQUE:
                for i in range(1, min(NEWEST, deque_type.__len__(obj)) + 1):
                    v = deque_type.__getitem__(obj, -i)
                    values.append(type_name(type(v)))
                    objects.append(v)
            else:
                for i, v in enumerate(set.__iter__(obj)):
                    if i == NEWEST:
                        break
                    values.append(type_name(type(v)))
                    objects.append(v)
        except Exception:
            pass
        return "\0".join(keys), "\0".join(values), tuple(objects)

    def subscript(key):
        # `[KEY]` as a person would type it: the repr of a str or int key (the built-in's own,
        # never a subclass's), `[...]` for any other or a long one.
        t = type(key)
        text = str.__repr__(key) if t is str else int.__repr__(key) if t is int else None
        return f"[{text}]" if text is not None and len(text) <= MAX_KEY_TEXT else "[...]"

    def ends(obj, kind):
        # (key or index, element) of the first and the last entry of a dict's values, a list or
        # a deque: a growing container held by an element (a registry per name, a handler in a
        # list) is reached at two lookups per container, however many entries it has.
        try:
            if kind == KIND_DICT:
                n = dict.__len__(obj)
                if n == 0:
                    return ()
                first = next(iter(dict.items(obj)))
                return (first,) if n == 1 else (first, next(reversed(dict.items(obj))))
            get = list.__getitem__ if kind == KIND_LIST else deque_type.__getitem__
            n = lengths[kind](obj)
            return ((0, get(obj, 0)), (n - 1, get(obj, n - 1))) if n > 1 else ((0, get(obj, 0)),) if n else ()
        except Exception:
            return ()

    def module_pass(found, own, reached_in, only=None):
        # Every module's containers, or only those of the modules named in `only`. Fills
        # reached_in: id of a container found -> the module its path starts from.
        seen = set(own)

        def note(obj, name, owner, kind, module_name):
            if id(obj) in found or id(obj) in excluded:
                return
            n = lengths[base_kind(kind)](obj)
            found[id(obj)] = (obj, name, owner, kind, n)
            reached_in[id(obj)] = module_name

        def visit(value, path, owner, depth, module_name):
            t = type(value)
            category = categories.get(t)
            if category is None:
                category = categories[t] = category_of(t)
            if category == SKIP:
                return
            if category <= KIND_DEQUE:
                note(value, path, owner, category, module_name)
                if category != KIND_SET and depth < MAX_DEPTH and id(value) not in seen:
                    seen.add(id(value))
                    for key, element in ends(value, category):
                        # Most elements are strings, numbers, functions: no path is made for them.
                        kind = categories.get(type(element))
                        if kind is None:
                            kind = categories[type(element)] = category_of(type(element))
                        if kind != SKIP:
                            visit(element, path + (subscript(key) if category == KIND_DICT else f"[{key}]"),
                                  owner, depth + 1, module_name)
                return
            if depth >= MAX_DEPTH or id(value) in seen:
                return
            if category == CLASS:
                attrs = get_type_dict(value)
                if attrs.get("__module__") != module_name:
                    return  # a class is walked where it is defined, not where it is imported
                seen.add(id(value))
                class_name = type_name(value)
                for attr, v in list(attrs.items()):
                    visit(v, f"{path}.{attr}", class_name, depth + 1, module_name)
                return
            seen.add(id(value))
            d = instance_dict(value)
            if d is None:
                return
            weak = weak_kind(t)
            if weak:
                data = d.get("data")
                if type(data) in (dict, set):
                    note(data, path, type_name(t), weak, module_name)
                return
            owner = type_name(t)
            for attr, v in list(d.items()):
                visit(v, f"{path}.{attr}", owner, depth + 1, module_name)

        excluded = excluded_ids()
        modules = list(sys.modules.items())
        # A script's names last: what it imported is named where it is defined.
        modules.sort(key=lambda item: item[0] == "__main__")
        for module_name, module in modules:
            if not isinstance(module_name, str) or not issubclass(type(module), module_type):
                continue
            if only is not None and module_name not in only:
                continue
            try:
                globals_ = get_module_dict(module)
                seen.add(id(globals_))
                for key, value in list(globals_.items()):
                    visit(value, f"{module_name}.{key}", module_name, 0, module_name)
            except Exception:
                continue
        visit = note = None  # visit's cell refers to itself: no cycle may keep `seen` alive
        return seen

    def owner_of(obj, own):
        # (name, owner type) of a container no module path reaches, from what refers to it:
        # an instance (or its __dict__), or a closure's cell.
        own = own | {id(obj)}
        for ref in gc.get_referrers(obj):
            if id(ref) in own:
                continue
            t = type(ref)
            if t is cell_type:
                for holder in gc.get_referrers(ref):
                    if type(holder) is tuple and id(holder) not in own:
                        for fn in gc.get_referrers(holder):
                            if type(fn) is function_type and fn.__closure__ is holder:
                                code = fn.__code__
                                var = code.co_freevars[holder.index(ref)] if ref in holder else "?"
                                where = f"{fn.__module__}.{fn.__qualname__}"
                                return f"<closure of {where}>.{var}", where
                return "<closure cell>", "cell"
            if t is dict:
                for holder in gc.get_referrers(ref):
                    if id(holder) in own or type(holder) is dict:
                        continue
                    if get_flags(type(holder)) & HEAPTYPE and instance_dict(holder) is ref:
                        return named_attribute(holder, ref, obj)
                continue
            if get_flags(t) & HEAPTYPE and not issubclass(t, type):
                d = instance_dict(ref)
                if d is not None:
                    return named_attribute(ref, d, obj)
        return f"<unreached {type_name(type(obj))}>", ""

    def named_attribute(holder, attrs, obj):
        owner = type_name(type(holder))
        for attr, v in list(attrs.items()):
            if v is obj:
                return f"<{owner} instance>.{attr}", owner
        return f"<{owner} instance>", owner

    def heap_pass(found, own):
        # Large containers that no module path reached, named by their owner the first time.
        excluded = excluded_ids()
        objects = gc.get_objects()
        own = own | {id(objects)}
        large = ext.large_containers(objects, deque_type, HEAP_FLOOR)
        del objects
        own.add(id(large))
        present = {id(obj) for obj in large}
        own.add(id(present))
        for key in [key for key in heap_names if key not in present]:
            heap_names.pop(key)  # gone, or emptied below the floor (its id may be another's)
        for obj in large:
            t = type(obj)
            key = id(obj)
            if key in found or key in own or key in excluded:
                continue
            kind = kind_of(t)
            n = lengths[kind](obj)
            named = heap_names.get(key)
            if named is None or named[2] != kind:
                if len(heap_names) >= MAX_TRACKED:
                    continue
                name, owner = owner_of(obj, own)
                named = heap_names[key] = (name, owner, kind)
            found[key] = (obj, named[0], named[1], kind, n)
        del large

    def walk(flags=0):
        began = time.thread_time_ns()
        walks[0] += 1
        if not flags & WALK_TRACKED_ONLY and walks[0] % HEAP_PASS_EVERY == 0:
            flags |= WALK_HEAP_PASS
        found, reached_in = {}, {}
        own = {id(found), id(reached_in), id(tracked), id(homes), id(heap_names), id(dict_getter)}
        only = set(homes.values()) if flags & WALK_TRACKED_ONLY else None
        seen = module_pass(found, own, reached_in, only)
        own |= {id(seen)}
        if flags & WALK_HEAP_PASS:
            heap_pass(found, own)
        items, new = [], []
        for key_id, (obj, name, owner, kind, n) in found.items():
            key = name if key_id not in heap_names else ("heap", key_id)
            if key in tracked:
                items.append((tracked[key], obj, name, owner, kind, n))
                if key_id in reached_in:
                    homes[key] = reached_in[key_id]
            elif n >= CONTAINER_FLOOR:
                new.append((n, key, obj, name, owner, kind))
        new.sort(key=lambda entry: -entry[0])
        for n, key, obj, name, owner, kind in new[:MAX_NEW_PER_WALK]:
            if len(tracked) >= MAX_TRACKED:
                break
            tracked[key] = cid = len(tracked) + 1
            if id(obj) in reached_in:
                homes[key] = reached_in[id(obj)]
            items.append((cid, obj, name, owner, kind, n))
        records = []
        for cid, obj, name, owner, kind, n in items:
            keys, values, objects = newest(obj, base_kind(kind))
            records.append((cid, kind, n, obj, name[:200], owner[:200], keys, values, objects))
        del found, reached_in, items, new, seen
        ext.report_containers(flags, time.thread_time_ns() - began, records)

    return walk
