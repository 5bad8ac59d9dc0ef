# growtrace CPython agent, Python half.
#
# Executed by sitecustomize.py (same folder) in a private module object that is never put in
# sys.modules; the file name has a '-' so it cannot be imported by name either. It:
#  - replaces functools.lru_cache by a copy of itself whose global `_lru_cache_wrapper` is
#    `factory` below: every lru_cache/cache created from now on gets a C probe (see
#    pyagent/src/probe.c) as its function, so misses = insertions are reported, while
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
    # -> the features the library offers (detach() when attached), or None when there is no
    # preload library and no log file: then the agent stays out of the way.
    import sys
    import gc
    import _weakref
    import functools

    features = ext.start(gc.get_objects, log_path, agent_path, api)
    if features < 0:
        return None
    agent = _Agent(ext, features, _Caches(ext, log_path is not None, sys, gc, _weakref, functools))
    agent.caches.register_existing(agent.real_wrapper, attached)
    if os_environ_flag("GROWTRACE_CONTAINERS", True):
        agent.start_walks()
    if attached:
        return agent.attach()
    agent.patch_lru_cache()
    return features


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


class _Caches:
    # The caches the library has been told of: `live` maps a cache id to (weak reference to the
    # wrapper, its CacheCreate fields, the names it is bound to or None until they are resolved).
    # The reference is weak: the agent must never keep a cache alive.

    def __init__(self, ext, logging, sys, gc, weakref, functools):
        self.ext = ext
        self.logging = logging
        self.sys = sys
        self.gc = gc
        self.weakref = weakref
        self.live = {}
        self.functools_globals = functools.__dict__
        self.patched_globals = dict(self.functools_globals)  # globals of the patched lru_cache
        self.own_globals = globals()
        self.cache_destroyed = ext.cache_destroyed  # bound now: module dicts are cleared at exit

    def find_bindings(self, wrapper, module_names):
        names, is_method = [], False
        for _module_name, name, value, method in module_bindings(self.sys, type(self.sys), module_names, False):
            if value is wrapper:
                names.append(name)
                is_method |= method
        seen = set()
        return [n for n in names if not (n in seen or seen.add(n))], is_method

    def announce(self, cache_id):
        # Emits (again) the CacheCreate of a live cache; resolves its names the first time.
        entry = self.live.get(cache_id)
        if entry is None:
            return
        ref, args, names = entry
        wrapper = ref()
        if wrapper is None:
            return
        (cache_dict, maxsize, flags, stack_id, module, qualname,
         creator_module, creator_file, creator_line, creation_stack) = args
        if names is None:
            names, is_method = self.find_bindings(wrapper, dict.fromkeys([creator_module, module]))
            if is_method:
                flags |= CACHE_METHOD
                args = (cache_dict, maxsize, flags) + args[3:]
            self.live[cache_id] = (ref, args, names)
        self.ext.cache_created(cache_id, wrapper, cache_dict, maxsize, flags, stack_id, module,
                               qualname, creator_module, creator_file, creator_line,
                               "\0".join(names), creation_stack)

    def announce_probe(self, probe):
        self.announce(probe.cache_id)

    def on_destroy(self, cache_id):
        # A closure over locals, not a method: it may run while the interpreter ends.
        live, cache_destroyed = self.live, self.cache_destroyed

        def callback(_ref, cache_id=cache_id):
            try:
                if live.pop(cache_id, None) is not None:
                    cache_destroyed(cache_id)
            except Exception:
                pass
        return callback

    def creator_frame(self):
        # The first frame that is neither ours nor functools' (decorating_function,
        # lru_cache, cache).
        frame = self.sys._getframe(1)
        while frame is not None and (frame.f_globals is self.own_globals or frame.f_globals is self.patched_globals
                                     or frame.f_globals is self.functools_globals):
            frame = frame.f_back
        return frame

    def register(self, wrapper, probe, cache_dict, user_function, maxsize, typed):
        # A cache made while the agent runs: known now, announced at its first miss.
        try:
            self.ext.attach_probe(probe, cache_dict)
            frame = self.creator_frame()
            creator_module = frame.f_globals.get("__name__", "") if frame is not None else ""
            creator_file = frame.f_code.co_filename if frame is not None else ""
            creator_line = frame.f_lineno if frame is not None else 0
            module, qualname = describe_callable(user_function)
            stack_id = self.ext.capture_stack()
            creation_stack = frames_text(frame) if self.logging else None
            flags = CACHE_TYPED if typed else 0
            args = (cache_dict, -1 if maxsize is None or maxsize < 0 else maxsize, flags, stack_id,
                    module, qualname, creator_module if isinstance(creator_module, str) else "",
                    creator_file, creator_line or 0, creation_stack)
            cache_id = probe.cache_id
            self.live[cache_id] = (self.weakref.ref(wrapper, self.on_destroy(cache_id)), args, None)
        except Exception:
            pass  # never break the program's decorator

    def register_existing(self, real_wrapper, attached):
        # Caches created before the agent: registered now, without creation stack; probed too
        # when attached (otherwise they were made before `site` ran: typing's and re's).
        bindings = binding_index(self.sys, type(self.sys), real_wrapper) if attached else None
        for obj in self.gc.get_objects():
            if type(obj) is not real_wrapper:
                continue
            try:
                self.register_one_existing(obj, attached, bindings)
            except Exception:
                continue

    def register_one_existing(self, obj, attached, bindings):
        own_dict = obj.__dict__
        cache_dict = next(r for r in self.gc.get_referents(obj) if type(r) is dict and r is not own_dict)
        info = obj.cache_info()
        params = own_dict.get("cache_parameters")
        typed = bool(params()["typed"]) if callable(params) else False
        fn = own_dict.get("__wrapped__", obj)
        module, qualname = describe_callable(fn)
        maxsize = -1 if info.maxsize is None else info.maxsize
        flags = CACHE_PREEXISTING | (CACHE_TYPED if typed else 0)
        creator = (module, "", 0)
        names = None
        adopted = self.ext.adopt_cache(obj) if attached else None
        if adopted is not None:
            probe, cache_dict = adopted
            cache_id = probe.cache_id
            names, is_method, creator = where_bound(bindings.get(id(obj), ()), fn, creator)
            if is_method:
                flags |= CACHE_METHOD
        else:
            cache_id = self.ext.new_cache_id()
        self.live[cache_id] = (self.weakref.ref(obj, self.on_destroy(cache_id)),
                               (cache_dict, maxsize, flags, 0, module, qualname) + creator + (None,),
                               names)
        self.announce(cache_id)

    def excluded_ids(self):
        # The agent's own containers, which no container walk may report.
        ids = {id(self.live), id(self.patched_globals)}
        for _ref, args, _names in list(self.live.values()):
            ids.add(id(args[0]))
        return ids

    def announce_again(self):
        # In a forked child, which writes a trace of its own: the caches announced in the parent.
        for cache_id, (_ref, _args, names) in list(self.live.items()):
            if names is not None:
                self.announce(cache_id)

    def release_all(self):
        for ref, _args, _names in list(self.live.values()):
            wrapper = ref()
            if wrapper is not None:
                self.ext.release_cache(wrapper)
        self.live.clear()


class _Agent:
    # What install() puts in place: the atexit callbacks, the patched lru_cache or (attached)
    # the probes and the hook on the wrapper type, the gc callback and the container walks;
    # detach() takes all of it back.

    def __init__(self, ext, features, caches):
        import atexit
        self.ext = ext
        self.caches = caches
        self.gc = caches.gc
        self.active = True
        # Registered first, so it runs last of the program's atexit callbacks: the state the
        # program leaves behind is measured before the interpreter frees it all.
        atexit.register(ext.process_exiting)
        self.scans_types = not features & FEATURE_NATIVE_TYPE_HOOK
        if self.scans_types:
            ext.enable_type_scan()
            atexit.register(ext.type_scan_final)  # runs before process_exiting (LIFO)
        self.real_wrapper = caches.functools_globals["_lru_cache_wrapper"]
        # One bound method, which every probe holds until its first miss. Held here, not by
        # `caches`: no reference cycle keeps an attached agent alive after detach().
        self.on_first_miss = caches.announce_probe
        self.walk = None

    def factory(self, user_function, maxsize, typed, cache_info_type):
        # `_lru_cache_wrapper` as the patched lru_cache sees it: the real one around a probe.
        if not self.active:
            return self.real_wrapper(user_function, maxsize, typed, cache_info_type)
        probe = self.ext.make_probe(user_function, self.on_first_miss)
        wrapper = self.real_wrapper(probe, maxsize, typed, cache_info_type)
        try:
            # Before update_wrapper runs the wrapper has no __dict__: its only dict referent
            # is the cache.
            cache_dict = next(r for r in self.gc.get_referents(wrapper) if type(r) is dict)
        except Exception:
            return wrapper
        self.caches.register(wrapper, probe, cache_dict, user_function, maxsize, typed)
        return wrapper

    def start_walks(self):
        import atexit
        walker = _ContainerWalker(self.ext, self.caches.sys, self.gc, self.caches.excluded_ids)
        self.walk = walker.walk
        self.ext.set_walker(self.walk, os_environ_float("GROWTRACE_CONTAINER_PERIOD", 0.25),
                            os_environ_float("GROWTRACE_CONTAINER_SHARE", 0.01))
        atexit.register(self.walk_at_exit)  # before process_exiting (LIFO): the state left behind

    def last_walk(self, flags):
        # At exit or detach: a whole walk only when one is due, else the tracked containers'
        # modules (docs/containers.md). Its allocations are not the program's.
        whole = self.ext.walk_due()
        self.ext.set_walker(None)
        self.ext.own_work(self.walk, flags if whole else flags | WALK_TRACKED_ONLY)

    def walk_at_exit(self):
        self.last_walk(WALK_FINAL)

    def attach(self):
        # In a running process: new caches are caught at the wrapper type's constructor.
        self.ext.hook_new_caches(self.real_wrapper, self.caches.register, self.on_first_miss)
        self.ext.take_gc_callbacks(self.gc)  # the program's gc.callbacks stay as they were (see below)
        return self.detach

    def detach(self):
        # Everything install() changed, put back; under the GIL, called by the library.
        import atexit
        self.active = False
        self.ext.unhook_new_caches()
        if self.scans_types:
            self.ext.type_scan_final()
            atexit.unregister(self.ext.type_scan_final)
        self.ext.give_back_gc_callbacks(self.gc)
        atexit.unregister(self.ext.process_exiting)
        if self.walk is not None:
            atexit.unregister(self.walk_at_exit)  # an equal bound method
            self.last_walk(0)  # a last measure of what grew while attached
        self.caches.release_all()
        self.ext.stop()

    def patch_lru_cache(self):
        # functools.lru_cache with `_lru_cache_wrapper` resolved to the factory.
        import functools
        import os
        original = functools.lru_cache
        patched_globals = self.caches.patched_globals
        patched_globals["_lru_cache_wrapper"] = self.factory
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
        # would (pyagent/src/gc_callbacks.c, "gc.callbacks, unchanged as the program sees it"). So a
        # program sees the gc.callbacks it would untraced, and cannot remove the agent's callback.
        self.ext.take_gc_callbacks(self.gc)
        os.register_at_fork(after_in_child=self.after_fork_in_child)

    def after_fork_in_child(self):
        if self.active:
            self.caches.announce_again()


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


HEAPTYPE = 1 << 9                   # type.__flags__ of a class made by `class` or type()
SKIP, CLASS, INSTANCE = 0, 10, 11   # what a walk does with an object that is not a container


def subscript(key):
    # `[KEY]` as a person would type it: the repr of a str or int key (the built-in's own,
    # never a subclass's), `[...]` for any other or a long one.
    t = type(key)
    text = str.__repr__(key) if t is str else int.__repr__(key) if t is int else None
    return f"[{text}]" if text is not None and len(text) <= MAX_KEY_TEXT else "[...]"


class _Types:
    # What a walk reads of a class, through `type`'s own descriptors: no metaclass's attribute
    # lookup runs.

    def __init__(self, module_type, deque_type):
        type_attrs = type.__dict__
        self.get_qualname = type_attrs["__qualname__"].__get__
        self.get_module = type_attrs["__module__"].__get__
        self.get_dict = type_attrs["__dict__"].__get__
        self.get_flags = type_attrs["__flags__"].__get__
        self.get_mro = type_attrs["__mro__"].__get__
        self.getset_type = type(type_attrs["__dict__"])
        self.module_type = module_type
        self.module_dict = module_type.__dict__["__dict__"].__get__
        self.deque_type = deque_type
        # Memos of one walk, emptied at its end (forget): keyed on the classes themselves, kept
        # across walks they would keep every class a walk ever saw alive.
        self.categories = {}   # type -> what a walk does with its instances (SKIP, a kind, CLASS, INSTANCE)
        self.dict_getter = {}  # class -> its instances' __dict__ descriptor (None: none, or not plain)

    def forget(self):
        self.categories.clear()
        self.dict_getter.clear()

    def name(self, t):
        try:
            module, qualname = self.get_module(t), self.get_qualname(t)
        except Exception:
            return "?"
        return qualname if module == "builtins" else f"{module}.{qualname}"

    def kind(self, t):
        if issubclass(t, dict):
            return KIND_DICT
        if issubclass(t, list):
            return KIND_LIST
        if issubclass(t, set):
            return KIND_SET
        if issubclass(t, self.deque_type):
            return KIND_DEQUE
        return 0

    def is_heap_type(self, t):
        return self.get_flags(t) & HEAPTYPE

    def category(self, t):
        category = self.categories.get(t)
        if category is None:
            category = self.categories[t] = self.category_of(t)
        return category

    def category_of(self, t):
        kind = self.kind(t)
        if kind:
            return kind
        if issubclass(t, type):
            return CLASS
        if issubclass(t, self.module_type) or not self.is_heap_type(t):
            return SKIP
        return INSTANCE

    def instance_dict(self, obj):
        # The instance's own __dict__, only through the C descriptor CPython gives classes.
        t = type(obj)
        getter = self.dict_getter.get(t, 0)
        if getter == 0:
            getter = None
            for base in self.get_mro(t):
                attr = self.get_dict(base).get("__dict__")
                if attr is not None:
                    getter = attr.__get__ if type(attr) is self.getset_type else None
                    break
            self.dict_getter[t] = getter
        if getter is None:
            return None
        d = getter(obj)
        return d if type(d) is dict else None

    def weak_kind(self, t):
        try:
            return WEAK_KINDS.get((self.get_module(t), self.get_qualname(t)), 0)
        except Exception:
            return 0


class _Contents:
    # A container's entries, read through its built-in type's own functions, never through a
    # method of the program's subclass.

    def __init__(self, types):
        deque_type = types.deque_type
        self.deque_type = deque_type
        self.type_name = types.name
        self.lengths = {KIND_DICT: dict.__len__, KIND_LIST: list.__len__, KIND_SET: set.__len__,
                        KIND_DEQUE: deque_type.__len__}

    def newest(self, obj, kind):
        # (key types, value types, newest objects), newest first; a dict keeps insertion order.
        type_name, deque_type = self.type_name, self.deque_type
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

    def ends(self, obj, kind):
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
            get = list.__getitem__ if kind == KIND_LIST else self.deque_type.__getitem__
            n = self.lengths[kind](obj)
            return ((0, get(obj, 0)), (n - 1, get(obj, n - 1))) if n > 1 else ((0, get(obj, 0)),) if n else ()
        except Exception:
            return ()


class _ModulePass:
    # One pass over every module's containers, or only those of the modules named in `only`.
    # Fills `found` (id -> (container, name, owner type, kind, entries)) and `reached_in` (id of
    # a container found -> the module its path starts from); run() returns the ids it saw.

    def __init__(self, types, contents, found, own, reached_in, excluded_ids):
        self.types = types
        self.contents = contents
        self.found = found
        self.reached_in = reached_in
        self.seen = set(own)
        self.excluded = excluded_ids()

    def run(self, modules, only):
        modules = list(modules.items())
        # A script's names last: what it imported is named where it is defined.
        modules.sort(key=lambda item: item[0] == "__main__")
        for module_name, module in modules:
            if not isinstance(module_name, str) or not issubclass(type(module), self.types.module_type):
                continue
            if only is not None and module_name not in only:
                continue
            try:
                globals_ = self.types.module_dict(module)
                self.seen.add(id(globals_))
                for key, value in list(globals_.items()):
                    self.visit(value, f"{module_name}.{key}", module_name, 0, module_name)
            except Exception:
                continue
        return self.seen

    def note(self, obj, name, owner, kind, module_name):
        if id(obj) in self.found or id(obj) in self.excluded:
            return
        n = self.contents.lengths[base_kind(kind)](obj)
        self.found[id(obj)] = (obj, name, owner, kind, n)
        self.reached_in[id(obj)] = module_name

    def visit(self, value, path, owner, depth, module_name):
        t = type(value)
        category = self.types.category(t)
        if category == SKIP:
            return
        if category <= KIND_DEQUE:
            self.note(value, path, owner, category, module_name)
            if category != KIND_SET and depth < MAX_DEPTH and id(value) not in self.seen:
                self.seen.add(id(value))
                self.visit_ends(value, category, path, owner, depth, module_name)
            return
        if depth >= MAX_DEPTH or id(value) in self.seen:
            return
        if category == CLASS:
            self.visit_class(value, path, depth, module_name)
        else:
            self.visit_instance(value, t, path, depth, module_name)

    def visit_ends(self, container, category, path, owner, depth, module_name):
        for key, element in self.contents.ends(container, category):
            # Most elements are strings, numbers, functions: no path is made for them.
            if self.types.category(type(element)) != SKIP:
                self.visit(element, path + (subscript(key) if category == KIND_DICT else f"[{key}]"),
                           owner, depth + 1, module_name)

    def visit_class(self, cls, path, depth, module_name):
        attrs = self.types.get_dict(cls)
        if attrs.get("__module__") != module_name:
            return  # a class is walked where it is defined, not where it is imported
        self.seen.add(id(cls))
        class_name = self.types.name(cls)
        for attr, v in list(attrs.items()):
            self.visit(v, f"{path}.{attr}", class_name, depth + 1, module_name)

    def visit_instance(self, obj, t, path, depth, module_name):
        self.seen.add(id(obj))
        d = self.types.instance_dict(obj)
        if d is None:
            return
        weak = self.types.weak_kind(t)
        if weak:
            data = d.get("data")
            if type(data) in (dict, set):
                self.note(data, path, self.types.name(t), weak, module_name)
            return
        owner = self.types.name(t)
        for attr, v in list(d.items()):
            self.visit(v, f"{path}.{attr}", owner, depth + 1, module_name)


class _ContainerWalker:
    # walk(flags=0): one walk, reported through ext.report_containers. Between walks it keeps
    # ids and names only.

    def __init__(self, ext, sys, gc, excluded_ids):
        import time
        from _collections import deque as deque_type
        self.ext = ext
        self.sys = sys
        self.gc = gc
        self.excluded_ids = excluded_ids
        self.thread_time_ns = time.thread_time_ns
        self.types = _Types(type(sys), deque_type)
        self.contents = _Contents(self.types)
        self.cell_type = type((lambda: ext).__closure__[0])
        self.function_type = type(subscript)
        self.tracked = {}     # key (name, or ("heap", id)) -> container id
        self.homes = {}       # key of a tracked container a module path reaches -> that module's name
        self.heap_names = {}  # id of a container no module path reaches -> (name, owner type, kind)
        self.walks = 0

    def walk(self, flags=0):
        try:
            self.walk_once(flags)
        finally:
            self.types.forget()

    def walk_once(self, flags):
        began = self.thread_time_ns()
        self.walks += 1
        if not flags & WALK_TRACKED_ONLY and self.walks % HEAP_PASS_EVERY == 0:
            flags |= WALK_HEAP_PASS
        found, reached_in = {}, {}
        own = {id(found), id(reached_in), id(self.tracked), id(self.homes), id(self.heap_names),
               id(self.types.categories), id(self.types.dict_getter)}
        only = set(self.homes.values()) if flags & WALK_TRACKED_ONLY else None
        seen = _ModulePass(self.types, self.contents, found, own, reached_in, self.excluded_ids).run(
            self.sys.modules, only)
        own |= {id(seen)}
        if flags & WALK_HEAP_PASS:
            self.heap_pass(found, own)
        items = self.measured(found, reached_in)
        records = []
        for cid, obj, name, owner, kind, n in items:
            keys, values, objects = self.contents.newest(obj, base_kind(kind))
            records.append((cid, kind, n, obj, name[:200], owner[:200], keys, values, objects))
        del found, reached_in, items, seen
        self.ext.report_containers(flags, self.thread_time_ns() - began, records)

    def measured(self, found, reached_in):
        # (container id, container, name, owner type, kind, entries) of the tracked containers
        # found, then of the largest new ones, which are tracked from now on.
        tracked, homes = self.tracked, self.homes
        items, new = [], []
        for key_id, (obj, name, owner, kind, n) in found.items():
            key = name if key_id not in self.heap_names else ("heap", key_id)
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
        return items

    def heap_pass(self, found, own):
        # Large containers that no module path reached, named by their owner the first time.
        heap_names = self.heap_names
        excluded = self.excluded_ids()
        objects = self.gc.get_objects()
        own = own | {id(objects)}
        large = self.ext.large_containers(objects, self.types.deque_type, HEAP_FLOOR)
        del objects
        own.add(id(large))
        present = {id(obj) for obj in large}
        own.add(id(present))
        for key in [key for key in heap_names if key not in present]:
            heap_names.pop(key)  # gone, or emptied below the floor (its id may be another's)
        for obj in large:
            key = id(obj)
            if key in found or key in own or key in excluded:
                continue
            kind = self.types.kind(type(obj))
            n = self.contents.lengths[kind](obj)
            named = heap_names.get(key)
            if named is None or named[2] != kind:
                if len(heap_names) >= MAX_TRACKED:
                    continue
                name, owner = self.owner_of(obj, own)
                named = heap_names[key] = (name, owner, kind)
            found[key] = (obj, named[0], named[1], kind, n)
        del large

    def owner_of(self, obj, own):
        # (name, owner type) of a container no module path reaches, from what refers to it:
        # an instance (or its __dict__), or a closure's cell.
        types = self.types
        own = own | {id(obj)}
        for ref in self.gc.get_referrers(obj):
            if id(ref) in own:
                continue
            t = type(ref)
            if t is self.cell_type:
                return self.closure_owner(ref, own)
            if t is dict:
                named = self.dict_owner(ref, obj, own)
                if named is not None:
                    return named
                continue
            if types.is_heap_type(t) and not issubclass(t, type):
                d = types.instance_dict(ref)
                if d is not None:
                    return self.named_attribute(ref, d, obj)
        return f"<unreached {types.name(type(obj))}>", ""

    def closure_owner(self, cell, own):
        for holder in self.gc.get_referrers(cell):
            if type(holder) is tuple and id(holder) not in own:
                for fn in self.gc.get_referrers(holder):
                    if type(fn) is self.function_type and fn.__closure__ is holder:
                        code = fn.__code__
                        var = code.co_freevars[holder.index(cell)] if cell in holder else "?"
                        where = f"{fn.__module__}.{fn.__qualname__}"
                        return f"<closure of {where}>.{var}", where
        return "<closure cell>", "cell"

    def dict_owner(self, attrs, obj, own):
        # The instance whose __dict__ `attrs` is, named by its attribute holding obj; or None.
        for holder in self.gc.get_referrers(attrs):
            if id(holder) in own or type(holder) is dict:
                continue
            if self.types.is_heap_type(type(holder)) and self.types.instance_dict(holder) is attrs:
                return self.named_attribute(holder, attrs, obj)
        return None

    def named_attribute(self, holder, attrs, obj):
        owner = self.types.name(type(holder))
        for attr, v in list(attrs.items()):
            if v is obj:
                return f"<{owner} instance>.{attr}", owner
        return f"<{owner} instance>", owner
