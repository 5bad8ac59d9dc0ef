"""Makes classes the ways C extensions and Cython do (ext/_gt_odd_types.c, built per CPython
version into the folder given as the first argument) and prints what was made, one line per
class, then uses them a little: instances, subclasses, names. Run untraced and under
`growtrace run` (tests/e2e/python_extensions_test.cpp): the output must be the same."""
import functools
import gc
import sys

sys.path.insert(0, sys.argv[1])
import _gt_odd_types  # noqa: E402

made = _gt_odd_types.make_all()
for label, cls, status in made:
    print(f"{label}: {status}")

by_label = {label: cls for label, cls, _ in made}
# Names where the type can give them (a hand-built type without names cannot).
for label in ("cython_static", "guard_page", "plain_static", "from_spec", "no_module", "with_module"):
    cls = by_label[label]
    module = getattr(cls, "__module__", "(none)")
    print(f"{label}: {module}.{cls.__qualname__} value={_gt_odd_types.instance_value(cls)}")
# Subclasses made by Python of the ones that allow it: heap types whose base is an odd one.
for label in ("cython_static", "guard_page", "plain_static", "from_spec"):
    sub = type(f"Sub_{label}", (by_label[label],), {"extra": label})
    print(f"subclass of {label}: {sub.__name__} mro={len(sub.__mro__)} extra={sub().extra}")
# Every class as a cache key (the agent describes keys by their classes' names), the hand-built
# ones too (no names of their own).


@functools.lru_cache(maxsize=None)
def per_class(cls, label):
    return f"{label}!"


print("keys", [per_class(cls, label) for label, cls, _ in made if cls is not None], per_class.cache_info().currsize)
gc.collect()
print(f"odd_types classes={len(made)}")
