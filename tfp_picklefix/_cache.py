"""A bijector cache for TFP >= 0.12: picklable, thread-safe, leak-free and cheap.

Drop-in for ``cache_util.BijectorCache`` (and ``...WithGreedyAttrs``): the same
class-level descriptor protocol (``Bijector._cache`` bound on attribute access), the
same contract, and the same methods (``forward``, ``inverse``, ``forward_attributes``,
``inverse_attributes``, ``weak_keys``, ``items``, ``clear``, ``storage``, ``__len__``).

The contract kept from upstream:
- ``b.inverse(b.forward(x)) is x`` and ``b.forward(b.inverse(y)) is y``;
- the attributes dict (log-det-Jacobians) is shared by both directions of an edge;
- an input stays retrievable while its output lives; both directions are dropped once
  the output (and then the input) is collected;
- bijectors equal by parameterization share entries; structured inputs and ``**kwargs``
  are part of the key.

What differs, on purpose:
- entries for graph (symbolic) tensors live in a storage attached to their graph, so
  they can never keep a traced ``FuncGraph`` alive;
- every mutation happens under a lock; weak-reference callbacks only enqueue, so no
  callback can raise or race with a lookup;
- inputs are never modified (NumPy arrays keep ``flags.writeable``); a writeable array
  is compared with a snapshot on a hit, so mutating it cannot produce a stale result;
- a bijector is identified by a token computed once per instance (upstream re-hashes
  the whole parameterization on every call), and no entry holds the bijector itself;
- a bound ``clear()`` touches only that bijector object's own entries; the unbound
  class-level ``clear()`` empties the cache;
- the cache pickles and deep-copies as an empty cache.

This module is self-contained (standard library; NumPy imported lazily), so that the
same code can be proposed to TFP as a native ``cache_util`` (see ``_upstream.py``).
"""
from __future__ import annotations

import collections
import itertools
import threading
import weakref

_STORAGE_ATTR = "_tfp_bijector_cache_storage"
_KIND_EAGER, _KIND_GRAPH, _KIND_NOREF = 0, 1, 2
_kinds = {}  # type -> kind, probed once per type
_kinds_lock = threading.Lock()


def _kind_of(value):
    t = type(value)
    kind = _kinds.get(t)
    if kind is None:
        try:
            weakref.ref(value)
        except TypeError:
            kind = _KIND_NOREF
        else:
            try:
                graph = value.graph  # symbolic TF tensors have one; eager ones raise
            except Exception:
                graph = None
            kind = _KIND_GRAPH if graph is not None and not callable(graph) else _KIND_EAGER
        with _kinds_lock:
            _kinds[t] = kind
    return kind


def _flatten(struct):
    """(leaves, treedef) for nests of list/tuple/namedtuple/dict; anything else is a leaf."""
    if isinstance(struct, (list, tuple)):
        leaves, defs = [], []
        for item in struct:
            sub_leaves, sub_def = _flatten(item)
            leaves.extend(sub_leaves)
            defs.append((len(sub_leaves), sub_def))
        return leaves, (type(struct), None, tuple(defs))
    if isinstance(struct, dict):
        keys = sorted(struct)
        leaves, defs = [], []
        for k in keys:
            sub_leaves, sub_def = _flatten(struct[k])
            leaves.extend(sub_leaves)
            defs.append((len(sub_leaves), sub_def))
        return leaves, (type(struct), tuple(keys), tuple(defs))
    return [struct], None


def _unflatten(treedef, leaves):
    if treedef is None:
        return leaves[0]
    kind, keys, defs = treedef
    items, start = [], 0
    for count, sub_def in defs:
        items.append(_unflatten(sub_def, leaves[start:start + count]))
        start += count
    if keys is not None:
        return kind(zip(keys, items))
    if kind is list or kind is tuple:
        return kind(items)
    if hasattr(kind, "_fields"):  # namedtuple
        return kind(*items)
    return kind(items)


def _hashable(value):
    """A dict key for a kwargs value: tensors/arrays by identity, the rest by value."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _hashable(value[k])) for k in sorted(value))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value), value)  # the value itself keeps the id from being reused
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return ("id", id(value), value)
    return value


def _containerize(value):
    """Python and NumPy scalars become 0-d arrays, as upstream does (they cannot be weakref'd)."""
    if isinstance(value, (int, float)) or _is_numpy_scalar(value):
        import numpy as np

        return np.array(value)
    return value


def _is_numpy_scalar(value):
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ != "ndarray" and hasattr(value, "dtype")


def _is_ndarray(value):
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ == "ndarray"


def _snapshot(leaves):
    """Copies of the writeable NumPy arrays among ``leaves`` (None where nothing to check)."""
    snaps = None
    for i, leaf in enumerate(leaves):
        if _is_ndarray(leaf) and leaf.flags.writeable:
            if snaps is None:
                snaps = [None] * len(leaves)
            snaps[i] = leaf.copy()
    return snaps


def _unchanged(leaves, snaps):
    import numpy as np

    for leaf, snap in zip(leaves, snaps):
        if snap is not None and not (leaf.shape == snap.shape and leaf.dtype == snap.dtype
                                     and np.array_equal(leaf, snap, equal_nan=leaf.dtype.kind in "fc")):
            return False
    return True


class _Edge(object):
    """One computed transformation: side A (the input of the call) and side B (its output).

    A is held strongly while B lives (so that B can be mapped back to A); B weakly.
    """

    __slots__ = ("a_key", "b_key", "a_strong", "a_refs", "a_def", "a_held", "b_refs", "b_def",
                 "a_snaps", "b_snaps", "attrs", "owner", "owner_cls", "bijector")

    def __init__(self, a_key, a_refs, attrs, owner, owner_cls, bijector):
        self.a_key = a_key
        self.b_key = None
        self.a_strong = None
        self.a_refs = a_refs
        self.a_def = None
        self.a_held = ()       # ids counted in the storage's ``held`` while a_strong is set
        self.b_refs = None
        self.b_def = None
        self.a_snaps = None
        self.b_snaps = None
        self.attrs = attrs
        self.owner = owner
        self.owner_cls = owner_cls
        # Held, as upstream's keys hold it, so that an equal bijector built later
        # still finds these entries; released with the edge.
        self.bijector = bijector

    def input(self):
        """Side A, if it is still alive (else None)."""
        if self.a_strong is not None:
            return self.a_strong
        leaves = [r() for r in self.a_refs]
        for leaf in leaves:
            if leaf is None:
                return None
        return _unflatten(self.a_def, leaves)

    def output(self):
        """Side B, if it is still alive (else None)."""
        refs = self.b_refs
        if refs is None:
            return None
        leaves = [r() for r in refs]
        for leaf in leaves:
            if leaf is None:
                return None
        return _unflatten(self.b_def, leaves)


class _Storage(object):
    """Entries of one cache in one place (the process, or one graph), under one lock."""

    def __init__(self):
        # Not reentrant on purpose: a weakref callback that fires while this thread
        # holds the lock (GC inside a locked section) must not purge under our feet.
        self.lock = threading.Lock()
        self.entries = {}      # key -> (edge, is_side_a)
        self.by_owner = {}     # owner serial -> set of keys
        self.pending = collections.deque()  # keys whose tensors died (filled by callbacks)
        self.held = {}         # id(leaf) -> how many edges hold that leaf strongly

    # Weakref callbacks run at arbitrary points (GC, other threads): they enqueue, and
    # purge at once only if the lock is free; otherwise the lock holder purges.
    def on_death(self, key):
        pending = self.pending
        storage_ref = weakref.ref(self)

        def callback(_ref, key=key, pending=pending, storage_ref=storage_ref):
            pending.append(key)
            storage = storage_ref()
            if storage is not None and storage.lock.acquire(False):
                try:
                    storage.purge()
                except Exception:  # never raise from a weakref callback
                    pass
                finally:
                    storage.lock.release()
        return callback

    def purge(self):
        """Drop the entries whose tensors died. Call with the lock held."""
        pending = self.pending
        while pending:
            key = pending.popleft()
            found = self.entries.get(key)
            if found is None:
                continue
            edge, is_a = found
            if is_a:
                refs = edge.a_refs
            else:
                refs = edge.b_refs
            if refs is not None and all(r() is not None for r in refs):
                continue  # a newer entry under an equal key, still alive
            self._remove_key(key, edge)
            if not is_a:
                # Output gone: release the input (its own death will drop side A).
                self.release(edge)
                edge.b_refs = None
                edge.b_key = None

    def hold(self, edge, value, leaves):
        """Keep side A alive (while side B lives), unless that would close a cycle.

        When every output leaf is itself kept alive by this storage (e.g. an inverse
        that returned an input cached by other edges), holding the input as well could
        make the edges keep each other alive for good: then side A stays weak.
        """
        held = self.held
        out_leaves = [r() for r in edge.b_refs]
        if out_leaves and all(id(leaf) in held for leaf in out_leaves if leaf is not None):
            return
        edge.a_strong = value
        ids = tuple(id(leaf) for leaf in leaves)
        for i in ids:
            held[i] = held.get(i, 0) + 1
        edge.a_held = ids

    def release(self, edge):
        held = self.held
        for i in edge.a_held:
            n = held.get(i, 0) - 1
            if n > 0:
                held[i] = n
            else:
                held.pop(i, None)
        edge.a_held = ()
        edge.a_strong = None

    def _remove_key(self, key, edge):
        del self.entries[key]
        keys = self.by_owner.get(edge.owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_owner[edge.owner]

    def add(self, key, edge, is_a):
        self.entries[key] = (edge, is_a)
        self.by_owner.setdefault(edge.owner, set()).add(key)

    def drop_edge(self, edge):
        for key in (edge.a_key, edge.b_key):
            if key is not None:
                found = self.entries.get(key)
                if found is not None and found[0] is edge:
                    self._remove_key(key, edge)
        self.release(edge)

    def clear_owner(self, serial):
        for key in list(self.by_owner.get(serial, ())):
            found = self.entries.get(key)
            if found is not None:
                self.drop_edge(found[0])
        self.by_owner.pop(serial, None)

    def clear_where(self, predicate):
        for key, (edge, _) in list(self.entries.items()):
            if key in self.entries and predicate(key, edge):
                self.drop_edge(edge)

    def clear_all(self):
        for edge, _ in list(self.entries.values()):
            edge.a_strong = None
            edge.a_held = ()
        self.entries.clear()
        self.by_owner.clear()
        self.pending.clear()
        self.held.clear()


class _Tokens(object):
    """Per-bijector identity: equal bijectors (by parameterization) get one shared token.

    Computed once per bijector instance (Bijector.__hash__/__eq__ walk the whole
    parameterization); the per-instance record is dropped when the bijector dies.
    """

    def __init__(self):
        self.lock = threading.RLock()
        self.by_id = {}        # id(bijector) -> (weakref, token, serial, class)
        self.by_hash = {}      # hash -> [(weakref, token)]
        self.serials = itertools.count(1)
        self.tokens = itertools.count(1)
        self.dead = collections.deque()

    def lookup(self, bijector):
        rec = self.by_id.get(id(bijector))
        if rec is not None and rec[0]() is bijector:
            return rec
        return self._slow(bijector)

    def _slow(self, bijector):
        with self.lock:
            self._purge()
            try:
                h = hash(bijector)
            except TypeError:
                h = None
            token = None
            bucket = self.by_hash.setdefault(h, []) if h is not None else None
            if bucket is not None:
                for ref, tok in bucket:
                    other = ref()
                    if other is not None and (other is bijector or _safe_eq(other, bijector)):
                        token = tok
                        break
            dead = self.dead
            ident = id(bijector)
            if token is None:
                token = next(self.tokens)
                if bucket is not None:
                    bucket.append((weakref.ref(bijector, lambda r, h=h: dead.append(("h", h))), token))
            rec = (weakref.ref(bijector, lambda r, i=ident: dead.append(("i", i))),
                   token, next(self.serials), type(bijector))
            self.by_id[ident] = rec
            return rec

    def _purge(self):
        while self.dead:
            what, k = self.dead.popleft()
            if what == "i":
                rec = self.by_id.get(k)
                if rec is not None and rec[0]() is None:
                    del self.by_id[k]
            else:
                bucket = self.by_hash.get(k)
                if bucket is not None:
                    bucket[:] = [(r, t) for r, t in bucket if r() is not None]
                    if not bucket:
                        del self.by_hash[k]


def _safe_eq(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


class _Shared(object):
    """State shared by a class-level cache and every view bound from it."""

    def __init__(self, forward_name, inverse_name):
        self.forward_name = forward_name
        self.inverse_name = inverse_name
        self.eager = _Storage()
        self.tokens = _Tokens()
        self.storages = weakref.WeakSet()  # eager + one per graph that has entries
        self.storages.add(self.eager)
        self.lock = threading.Lock()


class PicklefixBijectorCache(object):
    """Class-level bijector cache; ``Bijector._cache`` binds it to an instance on access."""

    __slots__ = ("_s", "_bijector", "_bijector_class", "_defining_class", "__weakref__")

    def __init__(self, forward_name="_forward", inverse_name="_inverse", bijector=None,
                 bijector_class=None, storage=None):
        self._s = _Shared(forward_name, inverse_name)
        self._bijector = bijector
        self._bijector_class = bijector_class
        self._defining_class = None  # the class whose _cache this is (set on install)

    # -- descriptor protocol ------------------------------------------------------------
    def __set_name__(self, owner, name):
        # ``_cache = BijectorCache()`` in a class body: remember the defining class,
        # whose unbound ``clear()`` empties the whole cache.
        if self._defining_class is None:
            self._defining_class = owner

    def __get__(self, bijector, bijector_class=None):
        bound = object.__new__(type(self))
        bound._s = self._s
        bound._bijector = bijector
        bound._bijector_class = bijector_class
        bound._defining_class = self._defining_class
        return bound

    # -- pickling / copying: always an empty cache --------------------------------------
    def __reduce__(self):
        return type(self), (self._s.forward_name, self._s.inverse_name)

    def __deepcopy__(self, memo):
        return type(self)(self._s.forward_name, self._s.inverse_name)

    def __copy__(self):
        return type(self)(self._s.forward_name, self._s.inverse_name)

    # -- upstream API -------------------------------------------------------------------
    @property
    def bijector(self):
        return self._bijector

    @property
    def bijector_class(self):
        return self._bijector_class

    @property
    def storage(self):
        """The process-wide (eager) entries: key -> (edge, is_input_side)."""
        return self._s.eager.entries

    def forward(self, x, **kwargs):
        return self._lookup(x, self._s.forward_name, self._s.inverse_name, kwargs)

    def inverse(self, y, **kwargs):
        return self._lookup(y, self._s.inverse_name, self._s.forward_name, kwargs)

    def forward_attributes(self, x, **kwargs):
        return self._attributes(x, self._s.forward_name, kwargs)

    def inverse_attributes(self, y, **kwargs):
        return self._attributes(y, self._s.inverse_name, kwargs)

    def weak_keys(self, bijector=None, bijector_class=None, direction=None):
        """The live inputs of the matching entries (upstream returns weak refs to them)."""
        return [value for value, _ in self.items(bijector, bijector_class, direction)]

    def items(self, bijector=None, bijector_class=None, direction=None):
        """[(input, output)] of the matching entries whose input is alive."""
        fn = self._direction(direction)
        token, cls = self._filter(bijector, bijector_class)
        out = []
        for storage in list(self._s.storages):
            with storage.lock:
                storage.purge()
                for key, (edge, is_a) in list(storage.entries.items()):
                    if (token is not None and key[0] != token) or (fn is not None and key[1] != fn):
                        continue
                    if cls is not None and not issubclass(edge.owner_cls, cls):
                        continue
                    refs = edge.a_refs if is_a else edge.b_refs
                    leaves = [r() for r in refs] if refs is not None else [None]
                    if any(leaf is None for leaf in leaves):
                        continue
                    value = leaves[0] if len(leaves) == 1 else leaves
                    out.append((value, edge.output() if is_a else edge.input()))
        return out

    def __len__(self):
        return len(self.items(direction="forward"))

    def clear(self):
        """Bound: drops this bijector object's own entries, nothing else.

        Unbound on the class that defines the cache (``tfb.Bijector._cache.clear()``):
        empties it. Unbound on a subclass (``tfb.Exp._cache.clear()``): that class's.
        """
        shared = self._s
        if self._bijector is not None:
            rec = shared.tokens.by_id.get(id(self._bijector))
            if rec is None or rec[0]() is not self._bijector:
                return  # never used: nothing of its own
            for storage in list(shared.storages):
                with storage.lock:
                    storage.purge()
                    storage.clear_owner(rec[2])
            return
        cls = self._bijector_class
        everything = cls is None or cls is self._defining_class or self._defining_class is None
        for storage in list(shared.storages):
            with storage.lock:
                if everything:
                    storage.clear_all()
                else:
                    storage.purge()
                    storage.clear_where(lambda key, edge: issubclass(edge.owner_cls, cls))

    # -- internals ----------------------------------------------------------------------
    def _direction(self, direction):
        if direction == "forward":
            return self._s.forward_name
        if direction == "inverse":
            return self._s.inverse_name
        if direction is None:
            return None
        raise ValueError('`direction` must be `"forward"`, `"inverse"`, or `None`. '
                         "Saw: {}".format(direction))

    def _filter(self, bijector, bijector_class):
        bijector = bijector if bijector is not None else self._bijector
        if bijector is not None:
            return self._s.tokens.lookup(bijector)[1], None
        cls = bijector_class if bijector_class is not None else self._bijector_class
        if cls is None or cls is self._defining_class:
            return None, None
        return None, cls

    def _storage_for(self, graph_leaf):
        """The process-wide storage, or the storage on ``graph_leaf``'s graph."""
        if graph_leaf is None:
            return self._s.eager
        # Entries for graph tensors live on the graph: they die with it.
        graph = graph_leaf.graph
        shared = self._s
        with shared.lock:
            per_graph = getattr(graph, _STORAGE_ATTR, None)
            if per_graph is None:
                per_graph = weakref.WeakKeyDictionary()
                setattr(graph, _STORAGE_ATTR, per_graph)
            storage = per_graph.get(shared)
            if storage is None:
                storage = per_graph[shared] = _Storage()
                shared.storages.add(storage)
        return storage

    def _key(self, token, fn, value, kwargs):
        """(key, leaves, treedef, first graph-tensor leaf or None), or None when ``value``
        cannot be weakly referenced."""
        if type(value) in _SIMPLE_CONTAINERS:
            leaves, treedef = _flatten(value)
            shape = _hashable_def(treedef)
        else:
            leaves, treedef, shape = [value], None, None
        ids = []
        graph_leaf = None
        for leaf in leaves:
            kind = _kind_of(leaf)
            if kind == _KIND_NOREF:
                return None
            if kind == _KIND_GRAPH and graph_leaf is None:
                graph_leaf = leaf
            ids.append(id(leaf))
        kw = _hashable(kwargs) if kwargs else ()
        return (token, fn, tuple(ids), shape, kw), leaves, treedef, graph_leaf

    def _edge(self, storage, key, leaves, rec, treedef=None):
        """The live (edge, is_a) for ``key``, else a new attrs-only edge. Lock held."""
        found = storage.entries.get(key)
        if found is not None:
            edge, is_a = found
            refs = edge.a_refs if is_a else edge.b_refs
            usable = refs is not None and all(r() is leaf for r, leaf in zip(refs, leaves))
            if usable and not is_a and edge.input() is None:
                usable = False
            if usable:
                snaps = edge.a_snaps if is_a else edge.b_snaps
                if snaps is None or _unchanged(leaves, snaps):
                    return found
            storage.drop_edge(edge)  # stale: an id was reused, or an array was mutated
        callback = storage.on_death(key)
        edge = _Edge(key, [weakref.ref(leaf, callback) for leaf in leaves], {}, rec[2], rec[3],
                     self._bijector)
        edge.a_def = treedef
        edge.a_snaps = _snapshot(leaves)
        storage.add(key, edge, True)
        return edge, True

    def _attributes(self, value, fn, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        rec = self._s.tokens.lookup(self._bijector)
        made = self._key(rec[1], fn, value, kwargs)
        if made is None:
            return {}
        key, leaves, _, graph_leaf = made
        storage = self._storage_for(graph_leaf)
        with storage.lock:
            if storage.pending:
                storage.purge()
            return self._edge(storage, key, leaves, rec)[0].attrs

    def _lookup(self, value, fn, inv_fn, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        rec = self._s.tokens.lookup(self._bijector)
        made = self._key(rec[1], fn, value, kwargs)
        if made is None:  # not weakly referenceable: compute, as if uncached
            return self._invoke(value, fn, kwargs, {})
        key, leaves, treedef, graph_leaf = made
        storage = self._storage_for(graph_leaf)
        with storage.lock:
            if storage.pending:
                storage.purge()
            edge, is_a = self._edge(storage, key, leaves, rec, treedef)
            if not is_a:
                return edge.input()
            out = edge.output()
            if out is not None:
                if edge.b_snaps is None or _unchanged(_flatten(out)[0], edge.b_snaps):
                    return out
                storage.drop_edge(edge)  # the cached output was mutated in place
                edge, is_a = self._edge(storage, key, leaves, rec, treedef)
            attrs = edge.attrs
        # Compute outside the lock: other threads (and nested bijectors) keep going.
        output = self._invoke(value, fn, kwargs, attrs)
        out_leaves, out_def = _flatten(output)
        out_leaves = [_containerize(leaf) for leaf in out_leaves]
        output = _unflatten(out_def, out_leaves)
        made_out = self._key(rec[1], inv_fn, output, kwargs)
        if made_out is None:
            return output
        out_key = made_out[0]
        if storage is self._s.eager and made_out[3] is not None:
            return output  # never let process-wide entries point into a graph
        with storage.lock:
            if storage.pending:
                storage.purge()
            current = storage.entries.get(key)
            if current is None or current[0] is not edge:
                # Cleared meanwhile, or another thread made a new edge: prefer its answer.
                if current is not None and current[1]:
                    winner = current[0].output()
                    if winner is not None:
                        return winner
                return output
            winner = edge.output()
            if winner is not None:
                return winner  # another thread finished first: one answer for everyone
            callback = storage.on_death(out_key)
            edge.b_refs = [weakref.ref(leaf, callback) for leaf in out_leaves]
            edge.b_def = out_def
            edge.b_key = out_key
            edge.b_snaps = _snapshot(out_leaves)
            storage.hold(edge, value, leaves)
            old = storage.entries.get(out_key)
            if old is not None and old[0] is not edge:
                storage.drop_edge(old[0])
            storage.add(out_key, edge, False)
        return output

    def _invoke(self, value, fn, kwargs, attributes):
        return getattr(self._bijector, fn)(value, **kwargs)


class _GreedyAttrs(object):
    """For bijectors whose directed functions return ``(output, attributes)`` (FFJORD)."""

    __slots__ = ()

    def _invoke(self, value, fn, kwargs, attributes):
        output, greedy_attrs = getattr(self._bijector, fn)(value, **kwargs)
        if greedy_attrs is not None:
            attributes.update(greedy_attrs)
        return output


class PicklefixBijectorCacheWithGreedyAttrs(_GreedyAttrs, PicklefixBijectorCache):
    """The cache for FFJORD-like bijectors (``BijectorCacheWithGreedyAttrs`` upstream)."""

    __slots__ = ()


class NoBijectorCache(PicklefixBijectorCache):
    """``TFP_PICKLEFIX_CACHE=off``: every call computes; attributes are per call."""

    __slots__ = ()

    def _lookup(self, value, fn, inv_fn, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        return self._invoke(value, fn, kwargs, {})

    def _attributes(self, value, fn, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        return {}


class NoBijectorCacheWithGreedyAttrs(_GreedyAttrs, NoBijectorCache):
    __slots__ = ()


_SIMPLE_CONTAINERS = (list, tuple, dict)


def _hashable_def(treedef):
    if treedef is None:
        return None
    kind, keys, defs = treedef
    return (kind, keys, tuple((n, _hashable_def(d)) for n, d in defs))


