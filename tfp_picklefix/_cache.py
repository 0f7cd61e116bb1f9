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
- inputs are never modified (NumPy arrays keep ``flags.writeable``); a NumPy array is
  compared with a snapshot on a hit, so changing it cannot produce a stale result (a
  read-only one too: its writeable base, or the flag set back, can change it);
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
import sys
import threading
import weakref

_STORAGE_ATTR = "_tfp_bijector_cache_storage"

# How the cache treats a value, by type (probed once per type):
_EAGER = 1    # weakly referenceable, not a graph tensor (TF eager tensor, JAX array)
_GRAPH = 2    # symbolic TF tensor: entries live on its graph
_NOREF = 3    # cannot be weakly referenced: computed, never cached
_NDARRAY = 4  # NumPy array: compared with a snapshot on a hit
_SCALAR = 5   # Python or NumPy scalar: never cached as an input; an output becomes a 0-d array
_NEST = 6     # list, tuple or dict (exact types): cached leaf by leaf
_kinds = {list: _NEST, tuple: _NEST, dict: _NEST, int: _SCALAR, float: _SCALAR, bool: _SCALAR,
          type(None): _NOREF}
_kinds_lock = threading.Lock()
_modules = sys.modules


def _kind_of(value):
    kind = _kinds.get(type(value))
    if kind is not None:
        return kind
    np = sys.modules.get("numpy")  # only NumPy's own objects can be NumPy objects
    if isinstance(value, (int, float)) or (np is not None and isinstance(value, np.generic)):
        kind = _SCALAR
    else:
        try:
            weakref.ref(value)
        except TypeError:
            kind = _NOREF
        else:
            if np is not None and isinstance(value, np.ndarray):
                kind = _NDARRAY
            else:
                try:
                    graph = value.graph  # symbolic TF tensors have one; eager ones raise
                except Exception:
                    graph = None
                kind = _GRAPH if graph is not None and not callable(graph) else _EAGER
    with _kinds_lock:
        _kinds[type(value)] = kind
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


def _hashable_def(treedef):
    if treedef is None:
        return None
    kind, keys, defs = treedef
    return (kind, keys, tuple((n, _hashable_def(d)) for n, d in defs))


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


def _parts(value):
    """(leaves, treedef, ids, shape, graph leaf or None) of an input, or None when it
    cannot be cached (a leaf cannot be weakly referenced). ``ids`` and ``shape`` go
    into the key; a single tensor is its own leaf (treedef None)."""
    kind = _kinds.get(type(value))
    if kind is None:
        kind = _kind_of(value)
    if kind == _EAGER or kind == _NDARRAY:
        return (value,), None, id(value), None, None
    if kind == _GRAPH:
        return (value,), None, id(value), None, value
    if kind != _NEST:
        return None
    leaves, treedef = _flatten(value)
    return _nest_parts(leaves, treedef)


def _nest_parts(leaves, treedef):
    ids = []
    graph_leaf = None
    for leaf in leaves:
        kind = _kinds.get(type(leaf))
        if kind is None:
            kind = _kind_of(leaf)
        if kind == _GRAPH:
            if graph_leaf is None:
                graph_leaf = leaf
        elif kind != _EAGER and kind != _NDARRAY:
            return None
        ids.append(id(leaf))
    return leaves, treedef, tuple(ids), _hashable_def(treedef), graph_leaf


def _output_parts(output):
    """Like :func:`_parts` for a computed output, whose scalars first become 0-d
    arrays as upstream does (they cannot be weakly referenced): (output, parts...)."""
    kind = _kinds.get(type(output))
    if kind is None:
        kind = _kind_of(output)
    if kind == _SCALAR or kind == _EAGER or kind == _NDARRAY:
        output = _containerize(output)  # scalars become 0-d arrays
        return output, (output,), None, id(output), None, None
    if kind == _GRAPH:
        return output, (output,), None, id(output), None, output
    if kind != _NEST:
        return None
    leaves, treedef = _flatten(output)
    leaves = [_containerize(leaf) for leaf in leaves]
    output = _unflatten(treedef, leaves)
    parts = _nest_parts(leaves, treedef)
    return None if parts is None else (output,) + parts


def _containerize(value):
    """Python and NumPy scalars become 0-d arrays, as upstream does."""
    kind = _kinds.get(type(value))
    if kind is None:
        kind = _kind_of(value)
    if kind == _SCALAR:
        import numpy as np

        return np.array(value)
    return value


_SMALL = 1 << 16  # bytes: below, snapshots are bytes; above, NumPy arrays


def _snap_of(array):
    """What a NumPy array holds now.

    Read-only arrays too: ``flags.writeable`` says nothing about the memory (a
    read-only view changes with its writeable base; an owner can set the flag back).

    Small arrays: bytes (cheapest to take and compare). Large ones: a NumPy copy,
    since NumPy's allocator serves large blocks far more cheaply than ``bytes`` (on
    some machines a 4 MB ``tobytes()`` costs 5 ms in page faults, a copy 0.1 ms).
    Either way the comparison is bitwise: a different NaN payload, or -0.0 for 0.0,
    reads as changed (the value is then recomputed, never stale).
    """
    if array.nbytes < _SMALL or array.dtype.hasobject:
        return (array.shape, array.dtype, array.tobytes())
    buf = _take_buffer(array.nbytes)
    if buf is not None:
        try:
            data = buf.view(array.dtype).reshape(array.shape)
            sys.modules["numpy"].copyto(data, array)
            return (array.shape, array.dtype, data)
        except Exception:  # a dtype that cannot view raw bytes: a plain copy below
            pass
    return (array.shape, array.dtype, array.copy())


# Large snapshots reuse the memory of dropped ones: a fresh multi-megabyte copy costs
# page faults (measured: 2 ms for 4 MB in a loop of NumPy calls; 0.25 ms into reused
# memory). At most _BUFFER_LIMIT bytes wait here; the unbound ``clear()`` frees them.
_BUFFER_LIMIT = 64 << 20
_buffers = {}          # nbytes -> [flat uint8 arrays]
_buffer_bytes = [0]
_buffers_lock = threading.Lock()


def _take_buffer(nbytes):
    with _buffers_lock:
        bufs = _buffers.get(nbytes)
        if not bufs:
            return None
        _buffer_bytes[0] -= nbytes
        return bufs.pop()


def _recycle(snaps):
    """Keep the memory of a dropped edge's large snapshots for the next ones."""
    for snap in snaps:
        if snap is None or type(snap[2]) is bytes:
            continue
        data = snap[2]
        nbytes = data.nbytes
        if not data.flags.c_contiguous:
            continue
        flat = data.reshape(-1).view(sys.modules["numpy"].uint8)
        with _buffers_lock:
            if _buffer_bytes[0] + nbytes <= _BUFFER_LIMIT:
                _buffers.setdefault(nbytes, []).append(flat)
                _buffer_bytes[0] += nbytes


def _free_buffers():
    with _buffers_lock:
        _buffers.clear()
        _buffer_bytes[0] = 0


def _snapshot(leaves):
    """Snapshots of the NumPy arrays among ``leaves`` (None: nothing to check)."""
    snaps = None
    for i, leaf in enumerate(leaves):
        if _kinds.get(type(leaf)) == _NDARRAY:
            if snaps is None:
                snaps = [None] * len(leaves)
            snaps[i] = _snap_of(leaf)
    return snaps


_UNSET = object()
_MEMCMP = _UNSET


def _load_memcmp():
    """The C library's ``memcmp`` through ctypes, or None where it cannot be had."""
    global _MEMCMP
    try:
        import ctypes

        lib = ctypes.cdll.msvcrt if sys.platform == "win32" else ctypes.CDLL(None)
        fn = lib.memcmp
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        probe = (ctypes.c_char * 4).from_buffer_copy(b"abcd")
        other = (ctypes.c_char * 4).from_buffer_copy(b"abce")
        if fn(probe, other, 3) != 0 or fn(probe, other, 4) == 0:
            fn = None
    except Exception:
        fn = None
    _MEMCMP = fn
    return fn


def _same_content(array, snap):
    shape, dtype, data = snap
    if array.shape != shape or array.dtype != dtype:
        return False
    if type(data) is bytes:
        return array.tobytes() == data
    np = sys.modules["numpy"]
    array = np.ascontiguousarray(array)
    memcmp = _load_memcmp() if _MEMCMP is _UNSET else _MEMCMP
    if memcmp is not None and data.flags.c_contiguous:
        # Large snapshots: the same bitwise comparison without NumPy's temporary boolean
        # array (a hit on 1e6 float32: about 0.50 -> 0.26 ms in one process). The storage lock is held,
        # so the snapshot's memory cannot be recycled meanwhile.
        return memcmp(array.ctypes.data, data.ctypes.data, data.nbytes) == 0
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(dtype.itemsize)
    if unsigned is None:
        return bool(np.array_equal(array.reshape(-1).view(np.uint8), data.reshape(-1).view(np.uint8)))
    return bool(np.array_equal(array.view(unsigned), data.view(unsigned)))


def _unchanged(leaves, snaps):
    for leaf, snap in zip(leaves, snaps):
        if snap is not None and not _same_content(leaf, snap):
            return False
    return True


class _Ref(weakref.ref):
    """A weak reference to one leaf that knows the storage key it belongs to."""

    __slots__ = ("key",)


# Storage keys. One tensor and no ``**kwargs`` (nearly every call): an int packing the
# bijector's token, the direction (0 forward, 1 inverse) and the tensor's id, which
# hashes and compares far faster than a tuple (each dict access re-hashes a tuple).
# Ids are addresses, below 2**64. Anything else: (token, direction, ids, treedef, kwargs).
_ID_BITS = 64


def _key_bases(token):
    """(forward, inverse) bases of a token's int keys: key = base + id(tensor)."""
    base = token << (_ID_BITS + 1)
    return base, base | (1 << _ID_BITS)


def _key(rec, d, ids, shape, kw):
    if shape is None and not kw:
        return rec[4 + d] + ids
    return (rec[1], d, ids, shape, kw)


def _key_token_direction(key):
    if type(key) is int:
        return key >> (_ID_BITS + 1), (key >> _ID_BITS) & 1
    return key[0], key[1]


def _refs(leaves, callback, key):
    refs = []
    for leaf in leaves:
        ref = _Ref(leaf, callback)
        ref.key = key
        refs.append(ref)
    return refs


def _live(refs, treedef):
    """The value behind ``refs`` (None if a leaf died, or no refs)."""
    if refs is None:
        return None
    if treedef is None:
        return refs[0]()
    leaves = [r() for r in refs]
    for leaf in leaves:
        if leaf is None:
            return None
    return _unflatten(treedef, leaves)


def _live_leaves(refs):
    return [r() for r in refs]


def _same(refs, leaves):
    """Whether ``refs`` point to exactly ``leaves`` (ids are reused once objects die)."""
    if refs is None or len(refs) != len(leaves):
        return False
    for ref, leaf in zip(refs, leaves):
        if ref() is not leaf:
            return False
    return True


class _WeakKey(object):
    """One entry's input as ``weak_keys()`` gives it (upstream: a ``WeakStructRef``):
    calling it gives the input (None once one of its tensors died)."""

    __slots__ = ("_refs", "_def")

    def __init__(self, leaves, treedef):
        self._refs = [weakref.ref(leaf) for leaf in leaves]
        self._def = treedef

    def __call__(self):
        return _live(self._refs, self._def)

    @property
    def alive(self):
        return self() is not None

    def __repr__(self):
        return "<weak key to {}>".format("nothing (dead)" if self() is None else
                                         type(self()).__name__)


class _Edge(object):
    """One computed transformation: side A (the input of the call) and side B (its output).

    A is held strongly while B lives (so that B can be mapped back to A); B weakly.
    An edge made for a single tensor that is held (the common case) has no weak
    references to side A (``a_refs`` is None): ``a_strong`` is side A while the edge
    is stored.
    """

    __slots__ = ("a_key", "b_key", "a_strong", "a_refs", "a_def", "a_held", "b_refs", "b_def",
                 "a_snaps", "b_snaps", "attrs", "owned", "owner_cls", "bijector")

    def __init__(self, a_key, a_refs, a_def, a_snaps, owned, owner_cls, bijector, attrs):
        self.a_key = a_key
        self.b_key = None
        self.a_strong = None
        self.a_refs = a_refs
        self.a_def = a_def
        self.a_held = ()       # ids counted in the storage's ``held`` while a_strong is set
        self.b_refs = None
        self.b_def = None
        self.a_snaps = a_snaps
        self.b_snaps = None
        self.attrs = attrs
        self.owned = owned  # the set of its bijector object's edges in this storage
        self.owner_cls = owner_cls
        # Held, as upstream's keys hold it, so that an equal bijector built later
        # still finds these entries; released with the edge.
        self.bijector = bijector

    def input(self):
        """Side A, if it is still alive (else None)."""
        if self.a_strong is not None:
            return self.a_strong
        return _live(self.a_refs, self.a_def)

    def a_leaves(self):
        """The leaves of side A (None for a dead one)."""
        if self.a_refs is None:
            return [self.a_strong]
        return [r() for r in self.a_refs]

    def is_a(self, leaves):
        """Whether side A is exactly ``leaves`` (ids are reused once objects die)."""
        if self.a_refs is None:
            return len(leaves) == 1 and self.a_strong is leaves[0]
        return _same(self.a_refs, leaves)

    def output(self):
        """Side B, if it is still alive (else None)."""
        return _live(self.b_refs, self.b_def)

    def checked_output(self):
        """Side B if it is alive and was not modified in place since it was made."""
        out = _live(self.b_refs, self.b_def)
        if out is None or self.b_snaps is None:
            return out
        return out if _unchanged(_live_leaves(self.b_refs), self.b_snaps) else None


class _Link(weakref.ref):
    """The common edge, built by :meth:`PicklefixBijectorCache._lookup`: one tensor in,
    one tensor out, side A held. It is itself the weak reference to its output, so a
    miss makes one object instead of an edge, a reference and a list, and the output's
    death hands the callback the edge itself. The same interface as :class:`_Edge`."""

    # ``a_held``: id(side A) while it is counted in the storage's ``held`` (that is,
    # while the Link is stored), else (). ``_attrs``: the attributes dict, made on first
    # use (most edges never need one).
    __slots__ = ("a_key", "b_key", "a_strong", "a_held", "a_snaps", "b_snaps", "_attrs",
                 "owned", "owner_cls", "bijector")
    a_refs = a_def = b_def = None  # class-level: a Link has no weak reference to side A
    # A weak reference hashes and compares by its referent (tensors do not hash); an
    # edge, by identity (it sits in the storage's per-owner sets).
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    @property
    def b_refs(self):
        return [self]

    @property
    def attrs(self):
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = {}
        return attrs

    def input(self):
        return self.a_strong

    def a_leaves(self):
        return [self.a_strong]

    def is_a(self, leaves):
        return len(leaves) == 1 and self.a_strong is leaves[0]

    def output(self):
        return self()

    def checked_output(self):
        out = self()
        if out is None or self.b_snaps is None:
            return out
        return out if _unchanged((out,), self.b_snaps) else None


def _drop_link(entries, held, link):
    """``_Storage.drop_edge`` for a :class:`_Link`, without the generality (it runs once
    per cache miss whose output is dropped). Lock held; idempotent."""
    found = entries.pop(link.a_key, None)
    if found is not None and found[0] is not link:
        entries[link.a_key] = found  # another edge's now: put it back
    found = entries.pop(link.b_key, None)
    if found is not None and found[0] is not link:
        entries[link.b_key] = found
    link.owned.discard(link)
    # (A Link's snapshots are small bytes, never large ones to recycle: see _lookup.)
    ident = link.a_held
    if ident:
        n = held.pop(ident, 1) - 1  # how many other edges still hold it
        if n:
            held[ident] = n
        link.a_held = ()
    link.a_strong = None  # may release objects whose own callbacks queue more


def _death_callback(storage):
    """One weakref callback per storage. It enqueues the dead reference, and purges at
    once only if the lock is free (else the lock holder purges): it never blocks, never
    raises, and cannot race with a lookup."""
    pending = storage.pending
    lock = storage.lock
    entries = storage.entries
    held = storage.held
    storage_ref = weakref.ref(storage)

    def callback(ref):
        if not lock.acquire(False):
            pending.append(ref)  # the lock holder purges it
            return
        try:
            if type(ref) is _Link and not pending:
                # The usual case: the output of a Link died.
                _drop_link(entries, held, ref)
                if pending:  # the input's release queued more
                    storage = storage_ref()
                    if storage is not None:
                        storage.purge()
            else:
                storage = storage_ref()
                if storage is None:
                    pass
                elif pending:
                    pending.append(ref)
                    storage.purge()
                else:  # inline: ``purge`` for this one reference
                    found = entries.get(ref.key)
                    if found is not None:
                        edge = found[0]
                        refs = edge.a_refs if found[1] else edge.b_refs
                        if refs is not None and ref in refs:
                            storage.drop_edge(edge)  # may release objects whose
                            if pending:              # own callbacks queue more
                                storage.purge()
        except Exception:  # never raise from a weakref callback
            pass
        lock.release()
    return callback


class _Storage(object):
    """Entries of one cache in one place (the process, or one graph), under one lock."""

    # Slots, here and in _Shared/_Tokens: the hot path reads their attributes on every
    # call, and a slot is one memory access where an instance dict is several (which
    # shows in large eager programs, where these objects are rarely in the CPU cache).
    __slots__ = ("lock", "entries", "by_owner", "pending", "held", "callback", "__weakref__")

    def __init__(self):
        # Not reentrant on purpose: a weakref callback that fires while this thread
        # holds the lock (GC inside a locked section) must not purge under our feet.
        self.lock = threading.Lock()
        self.entries = {}      # key -> (edge, is_side_a)
        # Bijector object (serial) -> the set of its stored edges: a miss adds to it, a
        # drop discards from it. The eager storage's sets are also in the bijectors'
        # token records and go when a record is purged (its bijector died); a graph
        # storage's stay, empty, until the graph dies.
        self.by_owner = {}
        self.pending = collections.deque()  # references whose leaves died (from callbacks)
        self.held = {}         # id(leaf) -> how many edges hold that leaf strongly
        self.callback = _death_callback(self)

    def purge(self):
        """Drop the edges whose tensors died. Call with the lock held.

        Either side dying drops the whole edge: once the output is gone nothing maps
        back to the input (which is then released), and once the input is gone the
        output cannot be inverted to it.
        """
        pending = self.pending
        entries = self.entries
        while pending:
            ref = pending.popleft()
            if type(ref) is _Link:  # idempotent: it may have been dropped meanwhile
                _drop_link(entries, self.held, ref)
                continue
            found = entries.get(ref.key)
            if found is not None:
                edge = found[0]
                refs = edge.a_refs if found[1] else edge.b_refs
                if refs is not None and ref in refs:
                    self.drop_edge(edge)

    def can_hold(self, out_leaves, in_leaves):
        """Whether side A (``in_leaves``) may be held strongly while side B lives.

        Only if some output leaf can die while the edge holds side A: one that is
        neither a leaf of side A (Identity returns its input; a coupling returns
        ``(x, f(x, z))``) nor kept alive by this storage (e.g. an inverse that returned
        an input cached by other edges). Otherwise holding side A could keep the edge,
        and what it holds, alive for good.
        """
        held = self.held
        for leaf in out_leaves:
            if id(leaf) in held:
                continue
            for other in in_leaves:
                if leaf is other:
                    break
            else:
                return True
        return not out_leaves

    def hold(self, edge, value, leaves):
        held = self.held
        edge.a_strong = value
        ids = tuple([id(leaf) for leaf in leaves])
        for i in ids:
            held[i] = held.get(i, 0) + 1
        edge.a_held = ids

    def add(self, key, edge, is_a):
        self.entries[key] = (edge, is_a)
        edge.owned.add(edge)

    def owned(self, serial):
        """The set of bijector ``serial``'s edges here (in the eager storage, the set
        that is also in the bijector's token record)."""
        edges = self.by_owner.get(serial)
        if edges is None:
            edges = self.by_owner[serial] = set()
        return edges

    def drop_edge(self, edge):
        """Remove both directions of ``edge`` (where they still point to it)."""
        entries = self.entries
        if type(edge) is _Link:
            _drop_link(entries, self.held, edge)
            return
        key = edge.a_key
        found = entries.get(key)
        if found is not None and found[0] is edge:
            del entries[key]
        key = edge.b_key
        if key is not None:
            found = entries.get(key)
            if found is not None and found[0] is edge:
                del entries[key]
        edge.owned.discard(edge)
        # Large snapshots' memory is kept for the next ones; once: a second drop of the
        # edge must not recycle it again. (Checked inline: most snapshots are small.)
        for snaps in (edge.a_snaps, edge.b_snaps):
            if snaps is not None:
                for snap in snaps:
                    if snap is not None and type(snap[2]) is not bytes:
                        _recycle(snaps)
                        break
        edge.a_snaps = edge.b_snaps = None
        if edge.a_held:
            held = self.held
            for i in edge.a_held:
                n = held.pop(i, 1) - 1  # how many other edges still hold it
                if n:
                    held[i] = n
            edge.a_held = ()
        edge.a_strong = None

    def clear_owner(self, serial):
        for edge in list(self.by_owner.get(serial, ())):
            self.drop_edge(edge)

    def clear_where(self, predicate):
        for key, (edge, _) in list(self.entries.items()):
            if key in self.entries and predicate(key, edge):
                self.drop_edge(edge)

    def clear_all(self):
        for edge, _ in list(self.entries.values()):
            edge.a_strong = None
            edge.a_held = ()
        self.entries.clear()
        for edges in list(self.by_owner.values()):
            edges.clear()
        self.pending.clear()
        self.held.clear()
        _free_buffers()


class _Tokens(object):
    """Per-bijector identity: equal bijectors (by parameterization) get one shared token.

    Computed once per bijector instance (Bijector.__hash__/__eq__ walk the whole
    parameterization); the per-instance record is dropped when the bijector dies. A
    token lasts while any bijector that has it lives, not just the first one: a new
    bijector is compared with a live one of each token of its hash.
    """

    __slots__ = ("lock", "by_id", "by_hash", "serials", "tokens", "dead", "eager_by_owner")

    def __init__(self, eager_by_owner):
        self.lock = threading.RLock()
        # id(bijector) -> (weakref, token, serial, class, forward key base, inverse key
        # base, the set of its edges in the eager storage)
        self.by_id = {}
        # hash -> {token: {id(bijector): weakref}}: the live bijectors that have each token
        self.by_hash = {}
        self.serials = itertools.count(1)
        self.tokens = itertools.count(1)
        self.dead = collections.deque()
        self.eager_by_owner = eager_by_owner  # the eager storage's ``by_owner``

    def lookup(self, bijector):
        """(weakref, token, serial, class, forward key base, inverse key base, edges)."""
        rec = self.by_id.get(id(bijector))
        if rec is not None and rec[0]() is bijector:
            return rec
        return self.slow(bijector)

    def slow(self, bijector):
        with self.lock:
            self._purge()
            try:
                h = hash(bijector)
            except TypeError:
                h = None
            token = None
            bucket = self.by_hash.setdefault(h, {}) if h is not None else None
            if bucket is not None:
                for tok, members in bucket.items():
                    for ref in members.values():
                        other = ref()
                        if other is not None:  # one live bijector speaks for its token
                            if other is bijector or _safe_eq(other, bijector):
                                token = tok
                            break
                    if token is not None:
                        break
            ident = id(bijector)
            if token is None:
                token = next(self.tokens)
            serial = next(self.serials)
            edges = self.eager_by_owner[serial] = set()
            dead = self.dead
            ref = weakref.ref(bijector, lambda r, i=(ident, serial, h, token): dead.append(i))
            if bucket is not None:
                bucket.setdefault(token, {})[ident] = ref
            rec = (ref, token, serial, type(bijector)) + _key_bases(token) + (edges,)
            self.by_id[ident] = rec
            return rec

    def _purge(self):
        while self.dead:
            ident, serial, h, token = self.dead.popleft()
            # Its edges hold it: a dead bijector's set is empty.
            self.eager_by_owner.pop(serial, None)
            rec = self.by_id.get(ident)
            if rec is not None and rec[0]() is None:
                del self.by_id[ident]
            bucket = self.by_hash.get(h) if h is not None else None
            members = bucket.get(token) if bucket is not None else None
            if members is not None:
                ref = members.get(ident)
                if ref is not None and ref() is None:  # (the id may be another's by now)
                    del members[ident]
                    if not members:
                        del bucket[token]
                        if not bucket:
                            del self.by_hash[h]


def _safe_eq(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


class _Shared(object):
    """State shared by a class-level cache and every view bound from it."""

    __slots__ = ("forward_name", "inverse_name", "names", "eager", "tokens", "by_id", "storages",
                 "lock",
                 "__weakref__")  # per-graph storages are keyed by it, weakly

    def __init__(self, forward_name, inverse_name):
        self.forward_name = forward_name
        self.inverse_name = inverse_name
        self.names = (forward_name, inverse_name)  # by direction: 0 forward, 1 inverse
        self.eager = _Storage()
        self.tokens = _Tokens(self.eager.by_owner)
        self.by_id = self.tokens.by_id  # the hot path's shortcut
        self.storages = weakref.WeakSet()  # eager + one per graph that has entries
        self.storages.add(self.eager)
        self.lock = threading.Lock()
        _shared_by_storage[id(self.eager.entries)] = self


# id(the eager entries dict, which ``storage`` returns) -> its _Shared: what a cache built
# with ``storage=other.storage`` shares, as upstream's caches share one storage.
_shared_by_storage = weakref.WeakValueDictionary()


def _shared_of(storage, forward_name, inverse_name):
    shared = _shared_by_storage.get(id(storage))
    if shared is None or shared.eager.entries is not storage:
        raise ValueError("`storage` must be the `storage` of another bijector cache of this "
                         "kind (got a {}); this cache keeps its entries in its own "
                         "structure".format(type(storage).__name__))
    if shared.names != (forward_name, inverse_name):
        raise ValueError("a cache that shares `storage` must use the same forward and "
                         "inverse names: {} (got {})".format(shared.names,
                                                             (forward_name, inverse_name)))
    return shared


class PicklefixBijectorCache(object):
    """Class-level bijector cache; ``Bijector._cache`` binds it to an instance on access."""

    __slots__ = ("_s", "_bijector", "_bijector_class", "_defining_class", "__weakref__")
    _greedy = False  # directed functions return (output, attributes): _GreedyAttrs

    def __init__(self, forward_name="_forward", inverse_name="_inverse", bijector=None,
                 bijector_class=None, storage=None):
        if storage is None:
            self._s = _Shared(forward_name, inverse_name)
        else:  # another cache's entries: shared, as upstream shares its storage
            self._s = _shared_of(storage, forward_name, inverse_name)
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
        return self._lookup(x, 0, kwargs)

    def inverse(self, y, **kwargs):
        return self._lookup(y, 1, kwargs)

    def forward_attributes(self, x, **kwargs):
        return self._attributes(x, 0, kwargs)

    def inverse_attributes(self, y, **kwargs):
        return self._attributes(y, 1, kwargs)

    def weak_keys(self, bijector=None, bijector_class=None, direction=None):
        """Weak references to the inputs of the matching entries, as upstream's
        (``WeakStructRef``): call one for its input, or None once that died."""
        return [_WeakKey(leaves, edge.a_def if is_a else edge.b_def)
                for edge, is_a, leaves in self._matching(bijector, bijector_class, direction)]

    def items(self, bijector=None, bijector_class=None, direction=None):
        """[(input, output)] of the matching entries whose input is alive."""
        return [(_unflatten(edge.a_def if is_a else edge.b_def, leaves),
                 edge.output() if is_a else edge.input())
                for edge, is_a, leaves in self._matching(bijector, bijector_class, direction)]

    def _matching(self, bijector, bijector_class, direction):
        """[(edge, is_a, the live leaves of that side)] of the matching entries."""
        d = self._direction(direction)
        token, cls = self._filter(bijector, bijector_class)
        out = []
        for storage in list(self._s.storages):
            with storage.lock:
                storage.purge()
                for key, (edge, is_a) in list(storage.entries.items()):
                    key_token, key_d = _key_token_direction(key)
                    if (token is not None and key_token != token) or (d is not None and key_d != d):
                        continue
                    if cls is not None and not issubclass(edge.owner_cls, cls):
                        continue
                    if is_a:
                        leaves = edge.a_leaves()
                    else:
                        leaves = _live_leaves(edge.b_refs) if edge.b_refs is not None else [None]
                    if any(leaf is None for leaf in leaves):
                        continue
                    out.append((edge, is_a, leaves))
        return out

    def __len__(self):
        return len(self._matching(None, None, "forward"))

    def clear(self):
        """Bound: drops this bijector object's own entries, nothing else.

        Unbound on the class that defines the cache (``tfb.Bijector._cache.clear()``),
        or with no class at all: empties it. Unbound on a subclass
        (``tfb.Exp._cache.clear()``, or a cache built with ``bijector_class=``): the
        entries of that class and its subclasses.
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
        everything = cls is None or cls is self._defining_class
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
            return 0
        if direction == "inverse":
            return 1
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

    def _token(self):
        """(weakref, token, serial, class) of the bound bijector."""
        return self._s.tokens.lookup(self._bijector)

    def _find(self, storage, key, leaves):
        """The usable (edge, is_a) under ``key`` for ``leaves``, or None. Lock held.

        An entry is stale when an id was reused by a new object, when its other side
        died, or when a NumPy array was modified in place since: then it is dropped.
        """
        found = storage.entries.get(key)
        if found is None:
            return None
        edge, is_a = found
        if is_a:
            usable = edge.is_a(leaves)
            snaps = edge.a_snaps
        else:
            usable = _same(edge.b_refs, leaves) and edge.input() is not None
            snaps = edge.b_snaps
            if usable and edge.a_snaps is not None:
                # The answer is the input: it must not have been changed in place either.
                usable = _unchanged(edge.a_leaves(), edge.a_snaps)
        if usable and (snaps is None or _unchanged(leaves, snaps)):
            return found
        storage.drop_edge(edge)
        return None

    def _answer(self, storage, key, leaves):
        """(the cached answer, None), or (None, the live edge for ``key`` that has no
        output yet, or None). Lock held. A cached output that was modified in place is
        dropped."""
        found = self._find(storage, key, leaves)
        if found is None:
            return None, None
        edge, is_a = found
        if not is_a:
            return edge.input(), None
        if edge.b_refs is None:
            return None, edge  # log-det-Jacobians computed before: keep them
        out = edge.checked_output()
        if out is not None:
            return out, None
        storage.drop_edge(edge)
        return None, None

    def _new_edge(self, storage, key, leaves, treedef, rec, callback, attrs):
        edge = _Edge(key, _refs(leaves, callback, key), treedef, _snapshot(leaves),
                     storage.owned(rec[2]), rec[3], self._bijector, attrs)
        storage.add(key, edge, True)
        return edge

    def _attributes(self, value, d, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        rec = self._token()
        parts = _parts(value)
        if parts is None:
            return {}
        leaves, treedef, ids, shape, graph_leaf = parts
        key = _key(rec, d, ids, shape, _hashable(kwargs) if kwargs else ())
        storage = self._s.eager if graph_leaf is None else self._storage_for(graph_leaf)
        with storage.lock:
            if storage.pending:
                storage.purge()
            found = self._find(storage, key, leaves)
            if found is not None:
                return found[0].attrs
            # No output yet: the input's own death drops this edge.
            return self._new_edge(storage, key, leaves, treedef, rec, storage.callback, {}).attrs

    def _lookup(self, value, d, kwargs):
        """Direction ``d`` (0 forward, 1 inverse) of ``value``, from the cache or computed
        (and then cached).

        The common case, one eager tensor or array and no ``**kwargs`` meeting no
        entry, runs here with everything inline; anything else, or anything unusual
        found on the way, takes :meth:`_lookup_any` / :meth:`_store`.
        """
        kind = _kinds.get(type(value))
        if kwargs or (kind != _EAGER and kind != _NDARRAY):
            return self._lookup_any(value, d, kwargs)
        shared = self._s
        bijector = self._bijector
        rec = shared.by_id.get(id(bijector))
        if rec is None or rec[0]() is not bijector:
            rec = shared.tokens.slow(bijector)
        key = rec[4 + d] + id(value)  # _key(rec, d, id(value), None, ())
        storage = shared.eager
        entries = storage.entries
        if key in entries:  # a plain read; whatever it finds is checked under the lock
            return self._lookup_any(value, d, kwargs)
        if self._greedy:
            attrs = {}
            output = self._invoke(value, shared.names[d], kwargs, attrs)
        else:
            attrs = None  # made on first use
            output = getattr(bijector, shared.names[d])(value)
        out_kind = _kinds.get(type(output))
        if out_kind != kind:
            if out_kind == _SCALAR:  # _containerize, inline: a third of its time
                np = _modules.get("numpy")
                output = np.array(output) if np is not None else _containerize(output)
                out_kind = _NDARRAY
            if out_kind != _EAGER and out_kind != _NDARRAY:
                return self._store(storage, rec, key, (value,), None, value, output, d, (),
                                   {} if attrs is None else attrs)
        out_key = rec[5 - d] + id(output)
        held = storage.held
        lock = storage.lock
        lock.acquire()
        try:
            if storage.pending:
                storage.purge()
            # Large NumPy arrays take _store: their snapshots are copies whose memory
            # is recycled, which a Link's drop does not do.
            simple = not (key in entries or out_key in entries or id(output) in held
                          or output is value
                          or (kind == _NDARRAY and value.nbytes >= _SMALL)
                          or (out_kind == _NDARRAY and output.nbytes >= _SMALL))
            if simple:
                # The input is held while the output lives (no weak reference to it);
                # the output's death drops the edge: a Link, built slot by slot.
                edge = _Link(output, storage.callback)
                ident = id(value)
                edge.a_key = key
                edge.b_key = out_key
                edge.a_strong = value
                edge.a_held = ident
                if kind == _NDARRAY:  # inline _snap_of, for small arrays
                    edge.a_snaps = [(value.shape, value.dtype, value.tobytes())]
                else:
                    edge.a_snaps = None
                if out_kind == _NDARRAY:
                    edge.b_snaps = [(output.shape, output.dtype, output.tobytes())]
                else:
                    edge.b_snaps = None
                edge._attrs = attrs
                owned = edge.owned = rec[6]
                edge.owner_cls = rec[3]
                edge.bijector = bijector
                held[ident] = held.get(ident, 0) + 1
                entries[key] = (edge, True)
                entries[out_key] = (edge, False)
                owned.add(edge)
        finally:
            lock.release()
        if simple:
            return output
        return self._store(storage, rec, key, (value,), None, value, output, d, (),
                           {} if attrs is None else attrs)

    def _lookup_any(self, value, d, kwargs):
        """:meth:`_lookup` for any input: structures, graph tensors, ``**kwargs``, hits."""
        if value is None:
            raise ValueError("Input must not be None.")
        rec = self._token()
        parts = _parts(value)
        if parts is None:  # not weakly referenceable: compute, as if uncached
            return self._invoke(value, self._s.names[d], kwargs, {})
        leaves, treedef, ids, shape, graph_leaf = parts
        kw = _hashable(kwargs) if kwargs else ()
        key = _key(rec, d, ids, shape, kw)
        storage = self._s.eager if graph_leaf is None else self._storage_for(graph_leaf)
        with storage.lock:
            if storage.pending:
                storage.purge()
            answer, edge = self._answer(storage, key, leaves)
            if answer is not None:
                return answer
            attrs = {} if edge is None else edge.attrs
        # Compute outside the lock: other threads (and nested bijectors) keep going.
        output = self._invoke(value, self._s.names[d], kwargs, attrs)
        return self._store(storage, rec, key, leaves, treedef, value, output, d, kw, attrs)

    def _store(self, storage, rec, key, leaves, treedef, value, output, d, kw, attrs):
        """Record ``output`` (direction ``d`` of ``value``) as the answer for ``key``;
        returns what the caller returns."""
        made = _output_parts(output)
        if made is None:
            return output
        output, out_leaves, out_def, out_ids, out_shape, out_graph = made
        if out_graph is not None and storage is self._s.eager:
            return output  # never let process-wide entries point into a graph
        out_key = _key(rec, 1 - d, out_ids, out_shape, kw)
        with storage.lock:
            if storage.pending:
                storage.purge()
            winner, edge = self._answer(storage, key, leaves)
            if winner is not None:
                return winner  # another thread finished first: one answer for all
            if edge is not None and edge.attrs is not attrs:
                for name, item in attrs.items():  # greedy attributes of this call
                    edge.attrs.setdefault(name, item)
            held = storage.can_hold(out_leaves, leaves)
            if edge is None:
                # While the output lives the input is held, and the output's death
                # drops the edge: the input needs no callback of its own.
                edge = self._new_edge(storage, key, leaves, treedef, rec,
                                      None if held else storage.callback, attrs)
            edge.b_refs = _refs(out_leaves, storage.callback, out_key)
            edge.b_def = out_def
            edge.b_key = out_key
            edge.b_snaps = _snapshot(out_leaves)
            if held:
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
    _greedy = True

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

    def _lookup(self, value, d, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        if kwargs or self._greedy:
            return self._invoke(value, self._s.names[d], kwargs, {})
        return getattr(self._bijector, self._s.names[d])(value)  # as the cache calls it

    def _attributes(self, value, d, kwargs):
        if value is None:
            raise ValueError("Input must not be None.")
        return {}


class NoBijectorCacheWithGreedyAttrs(_GreedyAttrs, NoBijectorCache):
    __slots__ = ()
