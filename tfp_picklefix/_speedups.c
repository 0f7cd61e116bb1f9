/* tfp_picklefix._speedups: the cache's common eager miss, and a Link's death, in C.
 *
 * Optional (see _native.py): _cache.py is the reference, pure Python, and what the
 * upstream diff proposes to TFP. This module does, step for step, what
 * PicklefixBijectorCache._lookup does there for one eager tensor or array and no
 * **kwargs (the kind lookup, the bijector's token, the two keys, the call of the
 * directed function, the Link with its snapshots, the held count, both entries and the
 * per-bijector set, under the storage's lock), and what the death callback does when a
 * Link's output dies (_drop_link). Anything else goes to the same Python methods as
 * there (_lookup_any, _store, purge, _Tokens.slow): no case is decided here that the
 * Python code does not decide the same way.
 *
 * The objects stay the Python ones of _cache.py (_Link, _Storage, _Shared and
 * PicklefixBijectorCache, all with __slots__): their slots are read and written through
 * the offsets of their member descriptors, found by name in setup(), which refuses
 * anything that is not a writable object slot.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#endif

/* Slots, by class. */
enum { L_A_KEY, L_B_KEY, L_A_STRONG, L_A_HELD, L_A_SNAPS, L_B_SNAPS, L_ATTRS, L_OWNED,
       L_OWNER_CLS, L_BIJECTOR, L_N };
static const char *link_names[L_N] = {"a_key", "b_key", "a_strong", "a_held", "a_snaps",
                                      "b_snaps", "_attrs", "owned", "owner_cls", "bijector"};
enum { C_S, C_BIJECTOR, C_N };
static const char *cache_names[C_N] = {"_s", "_bijector"};
enum { SH_NAMES, SH_EAGER, SH_TOKENS, SH_BY_ID, SH_N };
static const char *shared_names[SH_N] = {"names", "eager", "tokens", "by_id"};
enum { ST_LOCK, ST_ENTRIES, ST_PENDING, ST_HELD, ST_CALLBACK, ST_N };
static const char *storage_names[ST_N] = {"lock", "entries", "pending", "held", "callback"};

static Py_ssize_t link_off[L_N], cache_off[C_N], shared_off[SH_N], storage_off[ST_N];

/* The referent of weak reference ``ref`` (a new reference), or NULL once it died. */
static PyObject *
weak_get(PyObject *ref)
{
    PyObject *o;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(ref, &o) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return o;
#else
    o = PyWeakref_GetObject(ref);
    if (o == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return o == Py_None ? NULL : Py_NewRef(o);
#endif
}

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static PyObject *link_type, *kinds, *kind_eager, *kind_ndarray, *kind_scalar, *small;
static PyObject *cache_type;    /* PicklefixBijectorCache: its subclasses take _lookup */
static PyObject *containerize;  /* _cache._containerize, where NumPy is not imported */
static PyObject *s_lookup_any, *s_store, *s_purge, *s_slow, *s_acquire, *s_release,
    *s_append, *s_nbytes, *s_shape, *s_dtype, *s_tobytes, *s_lookup, *s_numpy, *s_array,
    *empty_tuple, *empty_dict, *one;

static int
offsets(PyObject *cls, const char **names, int n, Py_ssize_t *out)
{
    int i;
    for (i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, names[i]);
        PyMemberDef *member;
        if (descr == NULL)
            return -1;
        if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%s is not a slot", names[i]);
            return -1;
        }
        member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%s is not a writable object slot", names[i]);
            return -1;
        }
        out[i] = member->offset;
        Py_DECREF(descr);
    }
    return 0;
}

/* setup(Link, PicklefixBijectorCache, _Shared, _Storage, kinds, EAGER, NDARRAY, SCALAR,
 *       SMALL, containerize) */
static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *lt, *ct, *sht, *stt, *kd, *ke, *kn, *ks, *sm, *af;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OOOOO:setup", &PyType_Type, &lt, &PyType_Type, &ct,
                          &PyType_Type, &sht, &PyType_Type, &stt, &PyDict_Type, &kd, &ke, &kn,
                          &ks, &sm, &af))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)lt, &_PyWeakref_RefType)) {
        PyErr_SetString(PyExc_TypeError, "the Link type must subclass weakref.ref");
        return NULL;
    }
    if (offsets(lt, link_names, L_N, link_off) < 0 || offsets(ct, cache_names, C_N, cache_off) < 0
        || offsets(sht, shared_names, SH_N, shared_off) < 0
        || offsets(stt, storage_names, ST_N, storage_off) < 0)
        return NULL;
    Py_INCREF(lt); Py_XSETREF(link_type, lt);
    Py_INCREF(kd); Py_XSETREF(kinds, kd);
    Py_INCREF(ke); Py_XSETREF(kind_eager, ke);
    Py_INCREF(kn); Py_XSETREF(kind_ndarray, kn);
    Py_INCREF(ks); Py_XSETREF(kind_scalar, ks);
    Py_INCREF(sm); Py_XSETREF(small, sm);
    Py_INCREF(af); Py_XSETREF(containerize, af);
    Py_INCREF(ct); Py_XSETREF(cache_type, ct);
    Py_RETURN_NONE;
}

/* Set a slot that holds a reference (new reference stolen). */
static void
put(PyObject *o, Py_ssize_t off, PyObject *v)
{
    PyObject *old = SLOT(o, off);
    SLOT(o, off) = v;
    Py_XDECREF(old);
}

static int
call_void(PyObject *obj, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(obj, name);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Release the lock, keeping any exception being raised. */
static void
release(PyObject *lock)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (call_void(lock, s_release) < 0)
        PyErr_WriteUnraisable(lock);
    PyErr_Restore(type, value, tb);
}

/* [(array.shape, array.dtype, array.tobytes())] */
static PyObject *
snaps_of(PyObject *array)
{
    PyObject *shape, *dtype = NULL, *data = NULL, *snap = NULL, *list;
    shape = PyObject_GetAttr(array, s_shape);
    if (shape != NULL)
        dtype = PyObject_GetAttr(array, s_dtype);
    if (dtype != NULL)
        data = PyObject_CallMethodNoArgs(array, s_tobytes);
    if (data != NULL)
        snap = PyTuple_Pack(3, shape, dtype, data);
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(data);
    if (snap == NULL)
        return NULL;
    list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(snap);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, snap);
    return list;
}

/* 1 if array.nbytes >= SMALL, 0 if not, -1 on error */
static int
large(PyObject *array)
{
    int r;
    PyObject *nbytes = PyObject_GetAttr(array, s_nbytes);
    if (nbytes == NULL)
        return -1;
    r = PyObject_RichCompareBool(nbytes, small, Py_GE);
    Py_DECREF(nbytes);
    return r;
}

/* a "key in dict" that fails on error: 1, 0, -1 */
static int
has(PyObject *dict, PyObject *key)
{
    return PyDict_Contains(dict, key);
}

static PyObject *
lookup_any(PyObject *self, PyObject *value, PyObject *d)
{
    PyObject *args[4] = {self, value, d, empty_dict};
    return PyObject_VectorcallMethod(s_lookup_any, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                     NULL);
}

/* lookup(cache, value, d): cache._lookup(value, d, {}) */
static PyObject *
lookup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *self, *value, *dobj, *kind, *shared, *bijector, *by_id, *rec, *ident = NULL;
    PyObject *key = NULL, *storage, *entries, *held, *lock, *pending, *name, *output = NULL;
    PyObject *out_kind, *out_key = NULL, *out_ident = NULL, *link = NULL, *result = NULL;
    PyObject *owned, *entry, *count;
    Py_ssize_t d;
    int r, simple;

    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "lookup takes 3 arguments");
        return NULL;
    }
    if (cache_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tfp_picklefix._speedups: setup() not called");
        return NULL;
    }
    self = args[0]; value = args[1]; dobj = args[2];
    if ((PyObject *)Py_TYPE(self) != cache_type) {  /* a subclass: its own _lookup */
        PyObject *largs[4] = {self, value, dobj, empty_dict};
        return PyObject_VectorcallMethod(s_lookup, largs,
                                         4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    d = PyLong_AsSsize_t(dobj);
    if (d != 0 && d != 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "direction must be 0 or 1");
        return NULL;
    }
    kind = PyDict_GetItemWithError(kinds, (PyObject *)Py_TYPE(value));
    if (kind != kind_eager && kind != kind_ndarray) {
        if (kind == NULL && PyErr_Occurred())
            return NULL;
        return lookup_any(self, value, dobj);
    }
    shared = SLOT(self, cache_off[C_S]);
    bijector = SLOT(self, cache_off[C_BIJECTOR]);
    if (shared == NULL || bijector == NULL) {
        PyErr_SetString(PyExc_AttributeError, "unset cache slot");
        return NULL;
    }
    by_id = SLOT(shared, shared_off[SH_BY_ID]);
    ident = PyLong_FromVoidPtr(bijector);
    if (ident == NULL)
        return NULL;
    rec = PyDict_GetItemWithError(by_id, ident);
    Py_DECREF(ident);
    if (rec != NULL && PyTuple_CheckExact(rec) && PyTuple_GET_SIZE(rec) == 7
        && PyWeakref_Check(PyTuple_GET_ITEM(rec, 0))) {
        PyObject *target = weak_get(PyTuple_GET_ITEM(rec, 0));
        Py_XDECREF(target);  /* compared only: ``bijector`` is alive */
        if (target != bijector)
            rec = NULL;
    }
    if (rec != NULL) {
        Py_INCREF(rec);
    } else {
        if (PyErr_Occurred())
            return NULL;
        rec = PyObject_CallMethodOneArg(SLOT(shared, shared_off[SH_TOKENS]), s_slow, bijector);
        if (rec == NULL)
            return NULL;
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 7) {
            Py_DECREF(rec);
            PyErr_SetString(PyExc_TypeError, "unexpected token record");
            return NULL;
        }
    }
    /* key = rec[4 + d] + id(value) */
    ident = PyLong_FromVoidPtr(value);
    if (ident == NULL)
        goto done;
    key = PyNumber_Add(PyTuple_GET_ITEM(rec, 4 + d), ident);
    if (key == NULL)
        goto done;
    storage = SLOT(shared, shared_off[SH_EAGER]);
    entries = SLOT(storage, storage_off[ST_ENTRIES]);
    r = has(entries, key);
    if (r != 0) {
        if (r > 0)
            result = lookup_any(self, value, dobj);
        goto done;
    }
    name = PyTuple_GET_ITEM(SLOT(shared, shared_off[SH_NAMES]), d);
    output = PyObject_CallMethodOneArg(bijector, name, value);
    if (output == NULL)
        goto done;
    out_kind = PyDict_GetItemWithError(kinds, (PyObject *)Py_TYPE(output));
    if (out_kind == NULL && PyErr_Occurred())
        goto done;
    if (out_kind != kind) {
        if (out_kind == kind_scalar) {
            /* np.array(output) if NumPy is imported, else _containerize(output) */
            PyObject *array, *np = PyDict_GetItemWithError(PyImport_GetModuleDict(), s_numpy);
            if (np != NULL)
                array = PyObject_CallMethodOneArg(np, s_array, output);
            else if (PyErr_Occurred())
                goto done;
            else
                array = PyObject_CallOneArg(containerize, output);
            if (array == NULL)
                goto done;
            Py_SETREF(output, array);
            out_kind = kind_ndarray;
        }
        if (out_kind != kind_eager && out_kind != kind_ndarray)
            goto store;
    }
    out_ident = PyLong_FromVoidPtr(output);
    if (out_ident == NULL)
        goto done;
    out_key = PyNumber_Add(PyTuple_GET_ITEM(rec, 5 - d), out_ident);
    if (out_key == NULL)
        goto done;
    held = SLOT(storage, storage_off[ST_HELD]);
    lock = SLOT(storage, storage_off[ST_LOCK]);
    pending = SLOT(storage, storage_off[ST_PENDING]);
    Py_INCREF(lock);
    if (call_void(lock, s_acquire) < 0) {
        Py_DECREF(lock);
        goto done;
    }
    r = PyObject_IsTrue(pending);
    if (r > 0)
        r = call_void(storage, s_purge);
    if (r < 0)
        goto unlock;
    /* simple = not (key in entries or out_key in entries or id(output) in held
     *               or output is value or either array is large) */
    simple = output != value;
    if (simple && (r = has(entries, key)) != 0)
        simple = 0;
    if (simple && (r = has(entries, out_key)) != 0)
        simple = 0;
    if (simple && (r = has(held, out_ident)) != 0)
        simple = 0;
    if (simple && kind == kind_ndarray && (r = large(value)) != 0)
        simple = 0;
    if (simple && out_kind == kind_ndarray && (r = large(output)) != 0)
        simple = 0;
    if (r < 0)
        goto unlock;
    if (simple) {
        PyObject *a_snaps = NULL, *b_snaps = NULL;
        PyObject *cargs[2] = {output, SLOT(storage, storage_off[ST_CALLBACK])};
        link = PyObject_Vectorcall(link_type, cargs, 2, NULL);
        if (link == NULL)
            goto unlock;
        if (kind == kind_ndarray && (a_snaps = snaps_of(value)) == NULL)
            goto unlock;
        if (out_kind == kind_ndarray && (b_snaps = snaps_of(output)) == NULL) {
            Py_XDECREF(a_snaps);
            goto unlock;
        }
        owned = PyTuple_GET_ITEM(rec, 6);
        put(link, link_off[L_A_KEY], Py_NewRef(key));
        put(link, link_off[L_B_KEY], Py_NewRef(out_key));
        put(link, link_off[L_A_STRONG], Py_NewRef(value));
        put(link, link_off[L_A_HELD], Py_NewRef(ident));
        put(link, link_off[L_A_SNAPS], a_snaps ? a_snaps : Py_NewRef(Py_None));
        put(link, link_off[L_B_SNAPS], b_snaps ? b_snaps : Py_NewRef(Py_None));
        put(link, link_off[L_ATTRS], Py_NewRef(Py_None));
        put(link, link_off[L_OWNED], Py_NewRef(owned));
        put(link, link_off[L_OWNER_CLS], Py_NewRef(PyTuple_GET_ITEM(rec, 3)));
        put(link, link_off[L_BIJECTOR], Py_NewRef(bijector));
        /* held[ident] = held.get(ident, 0) + 1 */
        count = PyDict_GetItemWithError(held, ident);
        if (count == NULL) {
            if (PyErr_Occurred())
                goto unlock;
            count = Py_NewRef(one);
        } else if ((count = PyNumber_Add(count, one)) == NULL) {
            goto unlock;
        }
        r = PyDict_SetItem(held, ident, count);
        Py_DECREF(count);
        if (r < 0)
            goto unlock;
        entry = PyTuple_Pack(2, link, Py_True);
        if (entry == NULL)
            goto unlock;
        r = PyDict_SetItem(entries, key, entry);
        Py_DECREF(entry);
        if (r < 0)
            goto unlock;
        entry = PyTuple_Pack(2, link, Py_False);
        if (entry == NULL)
            goto unlock;
        r = PyDict_SetItem(entries, out_key, entry);
        Py_DECREF(entry);
        if (r < 0 || PySet_Add(owned, link) < 0)
            goto unlock;
        release(lock);
        Py_DECREF(lock);
        result = output;
        output = NULL;
        goto done;
    }
    release(lock);
    Py_DECREF(lock);
store:
    {
        /* self._store(storage, rec, key, (value,), None, value, output, d, (), {}) */
        PyObject *leaves = PyTuple_Pack(1, value), *attrs = PyDict_New();
        if (leaves != NULL && attrs != NULL) {
            PyObject *sargs[11] = {self, SLOT(shared, shared_off[SH_EAGER]), rec, key, leaves,
                                   Py_None, value, output, dobj, empty_tuple, attrs};
            result = PyObject_VectorcallMethod(s_store, sargs,
                                               11 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        Py_XDECREF(leaves);
        Py_XDECREF(attrs);
        goto done;
    }
unlock:
    release(lock);
    Py_DECREF(lock);
done:
    Py_XDECREF(link);
    Py_XDECREF(output);
    Py_XDECREF(out_key);
    Py_XDECREF(out_ident);
    Py_XDECREF(key);
    Py_XDECREF(ident);
    Py_DECREF(rec);
    return result;
}

/* _drop_link(entries, held, link), lock held. The Link may hold the last references to
 * itself (the entries' tuples: a weakref's callback gets a borrowed reference to its
 * weakref), so it is held here until the end. */
static int drop_link_held(PyObject *entries, PyObject *held, PyObject *link);

static int
drop_link(PyObject *entries, PyObject *held, PyObject *link)
{
    int r;
    Py_INCREF(link);
    r = drop_link_held(entries, held, link);
    Py_DECREF(link);
    return r;
}

static int
drop_link_held(PyObject *entries, PyObject *held, PyObject *link)
{
    int k;
    PyObject *keys[2] = {SLOT(link, link_off[L_A_KEY]), SLOT(link, link_off[L_B_KEY])};
    PyObject *ident, *owned;
    for (k = 0; k < 2; k++) {
        PyObject *found;
        if (keys[k] == NULL)
            continue;
        found = PyDict_GetItemWithError(entries, keys[k]);
        if (found == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (PyTuple_CheckExact(found) && PyTuple_GET_SIZE(found) >= 1
            && PyTuple_GET_ITEM(found, 0) == link) {
            if (PyDict_DelItem(entries, keys[k]) < 0)
                return -1;
        }
    }
    owned = SLOT(link, link_off[L_OWNED]);
    if (owned != NULL && PySet_Check(owned) && PySet_Discard(owned, link) < 0)
        return -1;
    ident = SLOT(link, link_off[L_A_HELD]);
    if (ident != NULL && PyLong_CheckExact(ident)) {
        PyObject *count = PyDict_GetItemWithError(held, ident);
        if (count == NULL) {
            if (PyErr_Occurred())
                return -1;
        } else {
            int last = PyObject_RichCompareBool(count, one, Py_LE);
            if (last < 0)
                return -1;
            if (last) {
                if (PyDict_DelItem(held, ident) < 0)
                    return -1;
            } else {
                PyObject *n = PyNumber_Subtract(count, one);
                int r;
                if (n == NULL)
                    return -1;
                r = PyDict_SetItem(held, ident, n);
                Py_DECREF(n);
                if (r < 0)
                    return -1;
            }
        }
        Py_INCREF(empty_tuple);
        put(link, link_off[L_A_HELD], empty_tuple);
    } else if (ident != NULL && !(PyTuple_CheckExact(ident) && PyTuple_GET_SIZE(ident) == 0)) {
        PyErr_SetString(PyExc_TypeError, "a Link's a_held is an id or ()");
        return -1;
    }
    Py_INCREF(Py_None);
    put(link, link_off[L_A_STRONG], Py_None);  /* last: may release objects, run callbacks */
    return 0;
}

/* The death callback of one storage: a C object called with the dead reference. */
typedef struct {
    PyObject_HEAD
    PyObject *storage_ref;  /* weakref to the _Storage */
    PyObject *lock, *entries, *held, *pending;
    vectorcallfunc vectorcall;
} Callback;

static PyTypeObject Callback_Type;

static PyObject *
callback_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Callback *cb = (Callback *)op;
    PyObject *ref, *r, *storage;
    int pend;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "callback takes one argument");
        return NULL;
    }
    ref = args[0];
    /* if not lock.acquire(False): pending.append(ref); return */
    r = PyObject_CallMethodOneArg(cb->lock, s_acquire, Py_False);
    if (r == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    pend = r == Py_False;
    Py_DECREF(r);
    if (pend) {
        r = PyObject_CallMethodOneArg(cb->pending, s_append, ref);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
        Py_RETURN_NONE;
    }
    Py_INCREF(cb);  /* the storage (and this callback with it) may go meanwhile */
    pend = PyObject_IsTrue(cb->pending);
    if (pend == 0 && Py_IS_TYPE(ref, (PyTypeObject *)link_type)) {
        if (drop_link(cb->entries, cb->held, ref) < 0)
            goto fail;
        pend = PyObject_IsTrue(cb->pending);  /* the input's release queued more */
    } else if (pend > 0 || Py_IS_TYPE(ref, (PyTypeObject *)link_type) == 0) {
        /* Anything else: queue it, for the storage's purge. */
        r = PyObject_CallMethodOneArg(cb->pending, s_append, ref);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
        pend = 1;
    }
    if (pend > 0 && (storage = weak_get(cb->storage_ref)) != NULL) {
        pend = call_void(storage, s_purge);
        Py_DECREF(storage);
    }
    if (pend < 0)
        goto fail;
    release(cb->lock);
    Py_DECREF(cb);
    Py_RETURN_NONE;
fail:
    PyErr_Clear();  /* never raise from a weakref callback */
    release(cb->lock);
    Py_DECREF(cb);
    Py_RETURN_NONE;
}

static PyObject *
callback_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *storage;
    Callback *cb;
    if (!PyArg_ParseTuple(args, "O:Callback", &storage))
        return NULL;
    if (cache_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tfp_picklefix._speedups: setup() not called");
        return NULL;
    }
    cb = (Callback *)type->tp_alloc(type, 0);
    if (cb == NULL)
        return NULL;
    cb->vectorcall = callback_call;
    cb->storage_ref = PyWeakref_NewRef(storage, NULL);
    cb->lock = SLOT(storage, storage_off[ST_LOCK]);
    cb->entries = SLOT(storage, storage_off[ST_ENTRIES]);
    cb->held = SLOT(storage, storage_off[ST_HELD]);
    cb->pending = SLOT(storage, storage_off[ST_PENDING]);
    if (cb->storage_ref == NULL || !cb->lock || !cb->entries || !cb->held || !cb->pending) {
        Py_DECREF(cb);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "unset storage slot");
        return NULL;
    }
    Py_INCREF(cb->lock);
    Py_INCREF(cb->entries);
    Py_INCREF(cb->held);
    Py_INCREF(cb->pending);
    return (PyObject *)cb;
}

static int
callback_traverse(Callback *cb, visitproc visit, void *arg)
{
    Py_VISIT(cb->storage_ref);
    Py_VISIT(cb->lock);
    Py_VISIT(cb->entries);
    Py_VISIT(cb->held);
    Py_VISIT(cb->pending);
    return 0;
}

static int
callback_clear(Callback *cb)
{
    Py_CLEAR(cb->storage_ref);
    Py_CLEAR(cb->lock);
    Py_CLEAR(cb->entries);
    Py_CLEAR(cb->held);
    Py_CLEAR(cb->pending);
    return 0;
}

static void
callback_dealloc(Callback *cb)
{
    PyObject_GC_UnTrack(cb);
    callback_clear(cb);
    Py_TYPE(cb)->tp_free((PyObject *)cb);
}

static PyTypeObject Callback_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tfp_picklefix._speedups.Callback",
    .tp_basicsize = sizeof(Callback),
    .tp_dealloc = (destructor)callback_dealloc,
    .tp_vectorcall_offset = offsetof(Callback, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_traverse = (traverseproc)callback_traverse,
    .tp_clear = (inquiry)callback_clear,
    .tp_new = callback_new,
};

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Link, Cache, Shared, Storage, kinds, EAGER, NDARRAY, "
                                   "SCALAR, SMALL, containerize)"},
    {"lookup", (PyCFunction)(void (*)(void))lookup, METH_FASTCALL,
     "lookup(cache, value, d): cache._lookup(value, d, {})"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "tfp_picklefix._speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_lookup_any, "_lookup_any");
    INTERN(s_store, "_store");
    INTERN(s_purge, "purge");
    INTERN(s_slow, "slow");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_append, "append");
    INTERN(s_nbytes, "nbytes");
    INTERN(s_shape, "shape");
    INTERN(s_dtype, "dtype");
    INTERN(s_tobytes, "tobytes");
    INTERN(s_lookup, "_lookup");
    INTERN(s_numpy, "numpy");
    INTERN(s_array, "array");
    if ((empty_tuple = PyTuple_New(0)) == NULL || (empty_dict = PyDict_New()) == NULL
        || (one = PyLong_FromLong(1)) == NULL)
        return NULL;
    if (PyType_Ready(&Callback_Type) < 0)
        return NULL;
    m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&Callback_Type);
    if (PyModule_AddObject(m, "Callback", (PyObject *)&Callback_Type) < 0)
        return NULL;
    return m;
}
