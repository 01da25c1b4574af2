#!/usr/bin/python3
"""A strict, in-memory Kubernetes API server for the asb-controller tests.

No kube-apiserver can be installed on the test machines, so this one follows the API conventions
the controller relies on, as a real server does (and nothing more):
  * one global resourceVersion counter; every write bumps it; lists carry the list RV;
  * watch from a resourceVersion with ADDED/MODIFIED/DELETED, BOOKMARK events when
    allowWatchBookmarks=true, and an ERROR event with a 410 Expired Status for compacted RVs;
  * 409 Conflict on updates/patches carrying a stale metadata.resourceVersion, 409 AlreadyExists;
  * generateName, uid, creationTimestamp, metadata.generation bumped on spec changes only;
  * the status subresource: PUT/PATCH of the object ignores status, of /status ignores the rest;
  * merge patches (application/merge-patch+json; strategic merge patch accepted for built-in kinds
    only, as a merge patch; a CRD answers 415 to it, as a real server does);
  * deletion with finalizers (deletionTimestamp), propagationPolicy Background/Foreground/Orphan
    and ownerReference garbage collection;
  * typed list items carry no kind/apiVersion for built-in kinds;
  * a created CustomResourceDefinition serves its resource from then on (every served version,
    its scope and status subresource; no schema validation or pruning).
Test hooks live under /fake/ (compact the event log, cut watch streams, inject 409s, statistics).

Run: fake_apiserver.py --port 0 --port-file F [--tls-cert C --tls-key K]
"""
import argparse
import bisect
import copy
import json
import random
import re
import ssl
import string
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# (group, version, plural) -> (kind, namespaced, has_status, builtin)
RESOURCES = {
    ("", "v1", "pods"): ("Pod", True, True, True),
    ("", "v1", "services"): ("Service", True, True, True),
    ("", "v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True, True, True),
    ("", "v1", "events"): ("Event", True, False, True),
    ("", "v1", "namespaces"): ("Namespace", False, True, True),
    ("networking.k8s.io", "v1", "networkpolicies"): ("NetworkPolicy", True, False, True),
    ("coordination.k8s.io", "v1", "leases"): ("Lease", True, False, True),
    ("agents.x-k8s.io", "v1beta1", "sandboxes"): ("Sandbox", True, True, False),
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxtemplates"): ("SandboxTemplate", True, False, False),
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxwarmpools"): ("SandboxWarmPool", True, True, False),
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"): ("SandboxClaim", True, True, False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions"):
        ("CustomResourceDefinition", False, True, True),
}
# Kinds whose "spec" is not under .spec: generation follows every non-metadata change.
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def status_obj(code, reason, message, details=None):
    o = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details:
        o["details"] = details
    return o


class ApiError(Exception):
    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def label_match(selector, labels):
    if not selector:
        return True
    labels = labels or {}
    for req in selector.split(","):
        req = req.strip()
        if not req:
            continue
        if "!=" in req:
            k, v = req.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in req:
            k, v = req.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif req.startswith("!"):
            if req[1:] in labels:
                return False
        elif req not in labels:
            return False
    return True


class Store:
    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 100
        self.objects = {}   # (res, ns, name) -> obj
        self.events = []    # (rv, res, type, obj)
        self.compacted = 0  # events with rv <= compacted are gone
        self.epoch = 0      # bumped by /fake/disconnect
        self.conflicts = 0  # next N object writes fail with 409
        self.stats = {}
        self.slow_ms = 0

    def count(self, verb, plural):
        key = f"{verb} {plural}"
        self.stats[key] = self.stats.get(key, 0) + 1

    # --- helpers (lock held) ---
    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def _emit(self, res, typ, obj):
        self.events.append((int(obj["metadata"]["resourceVersion"]), res, typ, copy.deepcopy(obj)))
        if len(self.events) > 20000:
            cut = self.events[:10000]
            self.compacted = cut[-1][0]
            self.events = self.events[10000:]
        self.lock.notify_all()

    def _inject_conflict(self, res):
        if self.conflicts > 0 and res[2] != "leases":
            self.conflicts -= 1
            raise ApiError(409, "Conflict", "Operation cannot be fulfilled: injected conflict, "
                           "the object has been modified; please apply your changes to the latest "
                           "version and try again")

    @staticmethod
    def _spec_part(obj):
        return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}

    def _check_rv(self, old, new):
        rv = new.get("metadata", {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {old["kind"]} "{old["metadata"]["name"]}": '
                           "the object has been modified; please apply your changes to the latest "
                           "version and try again")

    def _write(self, res, key, old, new, subresource):
        """Applies an update of `old` to `new` (both full objects), honouring subresources."""
        kind, namespaced, has_status, builtin = RESOURCES[res]
        self._check_rv(old, new)
        self._inject_conflict(res)
        result = copy.deepcopy(old)
        if subresource == "status":
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            meta = new.get("metadata", {})
            keep = {k: old["metadata"][k] for k in ("uid", "creationTimestamp", "name", "namespace",
                                                      "generation", "deletionTimestamp",
                                                      "generateName") if k in old["metadata"]}
            result["metadata"] = dict(meta)
            result["metadata"].update(keep)
            for k, v in self._spec_part(new).items():
                result[k] = v
            for k in list(self._spec_part(old)):
                if k not in new:
                    result.pop(k, None)
            if has_status:
                if "status" in old:
                    result["status"] = old["status"]
                else:
                    result.pop("status", None)
            elif "status" in new:
                result["status"] = new["status"]
            if self._spec_part(result) != self._spec_part(old):
                result["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        result["kind"], result["apiVersion"] = old["kind"], old["apiVersion"]
        if result == old:
            return old  # no-op writes do not bump the resourceVersion
        result["metadata"]["resourceVersion"] = self._next_rv()
        if old["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            return self._remove(res, key, result)
        self.objects[key] = result
        self._emit(res, "MODIFIED", result)
        self._foreground_check()
        return result

    def _remove(self, res, key, obj):
        self.objects.pop(key, None)
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(res, "DELETED", obj)
        self._collect(obj["metadata"]["uid"])
        self._foreground_check()
        return obj

    def _dependents(self, uid):
        for key, o in list(self.objects.items()):
            for ref in o["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == uid:
                    yield key, o
                    break

    def _collect(self, uid):
        """Background garbage collection of dependents of a deleted owner."""
        for key, o in list(self._dependents(uid)):
            if key not in self.objects:
                continue
            refs = [r for r in o["metadata"]["ownerReferences"] if r.get("uid") != uid]
            live = [r for r in refs if any(x["metadata"].get("uid") == r.get("uid")
                                           for x in self.objects.values())]
            if live:
                continue
            self._delete_obj(key[0], key, o, "Background")

    def _foreground_check(self):
        changed = True
        while changed:
            changed = False
            for key, o in list(self.objects.items()):
                fins = o["metadata"].get("finalizers") or []
                if "foregroundDeletion" not in fins or not o["metadata"].get("deletionTimestamp"):
                    continue
                uid = o["metadata"]["uid"]
                blocking = [d for _, d in self._dependents(uid)]
                if blocking:
                    continue
                o = copy.deepcopy(o)
                o["metadata"]["finalizers"] = [f for f in fins if f != "foregroundDeletion"]
                if not o["metadata"]["finalizers"]:
                    del o["metadata"]["finalizers"]
                    self._remove(key[0], key, o)
                else:
                    o["metadata"]["resourceVersion"] = self._next_rv()
                    self.objects[key] = o
                    self._emit(key[0], "MODIFIED", o)
                changed = True

    def _delete_obj(self, res, key, o, policy):
        o = copy.deepcopy(o)
        fins = list(o["metadata"].get("finalizers") or [])
        if policy == "Foreground":
            if "foregroundDeletion" not in fins:
                fins.append("foregroundDeletion")
            o["metadata"]["finalizers"] = fins
            for dkey, d in list(self._dependents(o["metadata"]["uid"])):
                if dkey in self.objects:
                    self._delete_obj(dkey[0], dkey, d, "Foreground")
        elif policy == "Orphan":
            for dkey, d in list(self._dependents(o["metadata"]["uid"])):
                d = copy.deepcopy(d)
                d["metadata"]["ownerReferences"] = [r for r in d["metadata"]["ownerReferences"]
                                                    if r.get("uid") != o["metadata"]["uid"]]
                if not d["metadata"]["ownerReferences"]:
                    del d["metadata"]["ownerReferences"]
                d["metadata"]["resourceVersion"] = self._next_rv()
                self.objects[dkey] = d
                self._emit(dkey[0], "MODIFIED", d)
        if fins:
            if not o["metadata"].get("deletionTimestamp"):
                o["metadata"]["deletionTimestamp"] = now()
                o["metadata"]["deletionGracePeriodSeconds"] = 0
                o["metadata"]["resourceVersion"] = self._next_rv()
                self.objects[key] = o
                self._emit(res, "MODIFIED", o)
            self._foreground_check()
            return o
        return self._remove(res, key, o)

    # --- verbs ---
    def create(self, res, ns, body):
        kind, namespaced, has_status, builtin = RESOURCES[res]
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        group, version, plural = res
        api_version = f"{group}/{version}" if group else version
        if body.get("kind") not in (None, kind) or body.get("apiVersion") not in (None, api_version):
            raise ApiError(400, "BadRequest", f"the object has kind {body.get('kind')}, "
                           f"apiVersion {body.get('apiVersion')}; expected {kind} {api_version}")
        with self.lock:
            self._inject_conflict(res)
            o = copy.deepcopy(body)
            meta = o.setdefault("metadata", {})
            if meta.get("resourceVersion"):
                raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
            if not meta.get("name"):
                gen = meta.get("generateName")
                if not gen:
                    raise ApiError(422, "Invalid", f"{kind} is invalid: metadata.name: Required value: "
                                   "name or generateName is required")
                for _ in range(10):
                    name = gen[:58] + "".join(random.choice(GEN_ALPHABET) for _ in range(5))
                    if (res, ns, name) not in self.objects:
                        break
                meta["name"] = name
            name = meta["name"]
            if len(name) > 253 or not NAME_RE.match(name):
                raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid: metadata.name: Invalid value')
            if namespaced:
                if meta.get("namespace") not in (None, ns):
                    raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                                   "match the namespace sent on the request")
                meta["namespace"] = ns
            key = (res, ns, name)
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            for r in meta.get("ownerReferences") or []:
                for f in ("apiVersion", "kind", "name", "uid"):
                    if not r.get(f):
                        raise ApiError(422, "Invalid", f"metadata.ownerReferences.{f}: Invalid value")
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            meta["generation"] = 1
            for k in ("deletionTimestamp", "selfLink"):
                meta.pop(k, None)
            if has_status:
                o.pop("status", None)
            o["kind"], o["apiVersion"] = kind, api_version
            if plural == "pods":
                o["status"] = {"phase": "Pending"}
            meta["resourceVersion"] = self._next_rv()
            self.objects[key] = o
            if plural == "customresourcedefinitions":
                serve_crd(o)
            self._emit(res, "ADDED", o)
            refs = meta.get("ownerReferences") or []
            if refs and not any(x["metadata"].get("uid") == r.get("uid")
                                for r in refs for x in self.objects.values()):
                # The garbage collector removes a dependent whose owners are all gone, also when
                # it was created after them (a controller acting on a stale cache).
                self._delete_obj(res, key, o, "Background")
            return o

    def get(self, res, ns, name):
        with self.lock:
            o = self.objects.get((res, ns, name))
            if o is None:
                raise ApiError(404, "NotFound", f'{res[2]} "{name}" not found')
            return copy.deepcopy(o)

    def update(self, res, ns, name, body, sub):
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        with self.lock:
            key = (res, ns, name)
            old = self.objects.get(key)
            if old is None:
                raise ApiError(404, "NotFound", f'{res[2]} "{name}" not found')
            if body.get("metadata", {}).get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
            if not body.get("metadata", {}).get("resourceVersion"):
                # Update without a resourceVersion is an unconditional update for most built-ins,
                # but CRDs require it: be strict for everything.
                raise ApiError(422, "Invalid", "metadata.resourceVersion: Invalid value: 0: must be "
                               "specified for an update")
            return copy.deepcopy(self._write(res, key, old, body, sub))

    def patch(self, res, ns, name, patch, ctype, sub):
        kind, namespaced, has_status, builtin = RESOURCES[res]
        if ctype.startswith("application/strategic-merge-patch+json") and not builtin:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                           "format - accepted media types include: application/json-patch+json, "
                           "application/merge-patch+json, application/apply-patch+yaml")
        if not (ctype.startswith("application/merge-patch+json")
                or ctype.startswith("application/strategic-merge-patch+json")):
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {ctype}")
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "patch must be an object")
        with self.lock:
            key = (res, ns, name)
            old = self.objects.get(key)
            if old is None:
                raise ApiError(404, "NotFound", f'{res[2]} "{name}" not found')
            new = merge_patch(old, patch)
            if "resourceVersion" not in (patch.get("metadata") or {}):
                new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return copy.deepcopy(self._write(res, key, old, new, sub))

    def delete(self, res, ns, name, policy, precondition_uid=None, precondition_rv=None):
        kind, namespaced, has_status, builtin = RESOURCES[res]
        with self.lock:
            key = (res, ns, name)
            o = self.objects.get(key)
            if o is None:
                raise ApiError(404, "NotFound", f'{res[2]} "{name}" not found')
            if precondition_uid and precondition_uid != o["metadata"]["uid"]:
                raise ApiError(409, "Conflict", "Precondition failed: UID in precondition does not match")
            if precondition_rv and precondition_rv != o["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "Precondition failed: resourceVersion in precondition does not match")
            return copy.deepcopy(self._delete_obj(res, key, o, policy or "Background"))

    def list(self, res, ns, selector, field_selector):
        with self.lock:
            items = [copy.deepcopy(o) for (r, n, _), o in sorted(self.objects.items())
                     if r == res and (ns is None or n == ns)
                     and label_match(selector, o["metadata"].get("labels"))
                     and field_match(field_selector, o)]
            return items, str(self.rv)


def serve_crd(crd):
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    for v in spec.get("versions") or []:
        if v.get("served"):
            RESOURCES[(spec.get("group"), v.get("name"), names.get("plural"))] = (
                names.get("kind"), spec.get("scope") == "Namespaced",
                "status" in (v.get("subresources") or {}), False)


def field_match(sel, o):
    if not sel:
        return True
    for req in sel.split(","):
        k, v = req.replace("==", "=").split("=", 1)
        path = k.split(".")
        cur = o
        for p in path:
            cur = cur.get(p) if isinstance(cur, dict) else None
        if (cur or "") != v:
            return False
    return True


STORE = Store()


def parse_path(path):
    """-> (res, ns, name, sub) or raises 404."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    ns = None
    if len(rest) >= 2 and rest[0] == "namespaces" and (len(rest) > 2 or (group, version, "namespaces") not in RESOURCES):
        ns, rest = rest[1], rest[2:]
    if not rest:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    res = (group, version, rest[0])
    if res not in RESOURCES:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if len(rest) > 3 or sub not in (None, "status", "scale"):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    kind, namespaced, has_status, builtin = RESOURCES[res]
    if sub == "status" and not has_status:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if sub == "scale" and res[2] != "sandboxwarmpools":
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if namespaced and name is not None and ns is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return res, ns, name, sub


def list_kind(res):
    return RESOURCES[res][0] + "List"


def api_version(res):
    return f"{res[0]}/{res[1]}" if res[0] else res[1]


def strip_typed(res, o):
    if RESOURCES[res][3]:
        o.pop("kind", None)
        o.pop("apiVersion", None)
    return o


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver/1"
    # One write per response and no Nagle: keep-alive clients otherwise wait out delayed ACKs.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n and not self._body_read else b""
        self._body_read = True
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid JSON body")

    def _dispatch(self, method):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        self._body_read = False
        try:
            if u.path.startswith("/fake/"):
                return self._fake(method, u.path, q)
            if u.path in ("/healthz", "/readyz", "/livez"):
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(data)
                return
            auth = self.server.token
            given = self.headers.get("Authorization")
            admin = self.server.admin_token and given == f"Bearer {self.server.admin_token}"
            if auth and not admin and given != f"Bearer {auth}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if STORE.slow_ms:
                time.sleep(STORE.slow_ms / 1000)
            res, ns, name, sub = parse_path(u.path)
            if self.server.rbac is not None and not admin:
                self._authorize(method, res, ns, name, sub, q)
            with STORE.lock:
                STORE.count("WATCH" if q.get("watch", "").lower() in ("true", "1") else method, res[2])
            if method == "GET" and name is None:
                if q.get("watch", "").lower() in ("true", "1"):
                    return self._watch(res, ns, q)
                items, rv = STORE.list(res, ns, q.get("labelSelector"), q.get("fieldSelector"))
                return self._send(200, {"kind": list_kind(res), "apiVersion": api_version(res),
                                        "metadata": {"resourceVersion": rv},
                                        "items": [strip_typed(res, i) for i in items]})
            if method == "POST" and name is None:
                return self._send(201, STORE.create(res, ns, self._body()))
            if name is None:
                raise ApiError(405, "MethodNotAllowed", "method not allowed on a collection")
            if sub == "scale":
                return self._scale(method, res, ns, name)
            if method == "GET":
                return self._send(200, STORE.get(res, ns, name))
            if method == "PUT":
                return self._send(200, STORE.update(res, ns, name, self._body(), sub))
            if method == "PATCH":
                return self._send(200, STORE.patch(res, ns, name, self._body(),
                                                   self.headers.get("Content-Type", ""), sub))
            if method == "DELETE":
                body = self._body()
                policy = q.get("propagationPolicy") or body.get("propagationPolicy")
                pre = body.get("preconditions") or {}
                o = STORE.delete(res, ns, name, policy, pre.get("uid"), pre.get("resourceVersion"))
                return self._send(200, o)
            raise ApiError(405, "MethodNotAllowed", "method not allowed")
        except ApiError as e:
            # A request refused before its body was read (401, 403): read it now, as
            # kube-apiserver does, or its bytes would be taken for the next request on the
            # kept-alive connection.
            if not self._body_read:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                self._body_read = True
            self._send(e.code, status_obj(e.code, e.reason, e.message))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _authorize(self, method, res, ns, name, sub, q):
        """RBAC for the one user of the token: ClusterRole rules everywhere, Role rules in their
        namespace; resourceNames restrict named requests (and never allow list/watch/create)."""
        watching = q.get("watch", "").lower() in ("true", "1")
        verb = {"GET": "watch" if watching else ("get" if name else "list"), "POST": "create",
                "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
        resource = res[2] + (f"/{sub}" if sub else "")
        for rule in self.server.rbac:
            if rule.get("namespace") and rule["namespace"] != ns:
                continue
            if res[0] not in rule.get("apiGroups", []) and "*" not in rule.get("apiGroups", []):
                continue
            if resource not in rule.get("resources", []) and "*" not in rule.get("resources", []):
                continue
            if verb not in rule.get("verbs", []) and "*" not in rule.get("verbs", []):
                continue
            names = rule.get("resourceNames")
            if names and (not name or name not in names):
                continue
            return
        with STORE.lock:
            STORE.count("FORBIDDEN " + verb, resource)
        raise ApiError(403, "Forbidden", f'{resource} is forbidden: cannot {verb} resource "{resource}"'
                       f' in API group "{res[0]}"' + (f' in the namespace "{ns}"' if ns else ""))

    def _scale(self, method, res, ns, name):
        o = STORE.get(res, ns, name)
        if method == "PUT":
            body = self._body()
            replicas = body.get("spec", {}).get("replicas")
            o = STORE.patch(res, ns, name, {"spec": {"replicas": replicas},
                                            "metadata": {"resourceVersion": body.get("metadata", {}).get("resourceVersion")}},
                            "application/merge-patch+json", None)
        elif method == "PATCH":
            body = self._body()
            replicas = (body.get("spec") or {}).get("replicas")
            if replicas is not None:
                o = STORE.patch(res, ns, name, {"spec": {"replicas": replicas}},
                                "application/merge-patch+json", None)
        elif method != "GET":
            raise ApiError(405, "MethodNotAllowed", "method not allowed")
        st = o.get("status", {})
        self._send(200, {"kind": "Scale", "apiVersion": "autoscaling/v1",
                         "metadata": {"name": name, "namespace": ns, "uid": o["metadata"]["uid"],
                                      "resourceVersion": o["metadata"]["resourceVersion"]},
                         "spec": {"replicas": o.get("spec", {}).get("replicas", 1)},
                         "status": {"replicas": st.get("replicas", 0), "selector": st.get("selector", "")}})

    def _chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, res, ns, q):
        sel, fsel = q.get("labelSelector"), q.get("fieldSelector")
        bookmarks = q.get("allowWatchBookmarks", "").lower() in ("true", "1")
        timeout = float(q.get("timeoutSeconds") or 1800)
        rv = q.get("resourceVersion") or ""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        # The connection ends with the watch: said up front, so that no client reuses it and
        # races the close (RemoteDisconnected on its next request).
        self.send_header("Connection", "close")
        self.end_headers()
        deadline = time.monotonic() + timeout
        with STORE.lock:
            epoch = STORE.epoch
            if rv in ("", "0"):
                items, cur = STORE.list(res, ns, sel, fsel)
                pending = [{"type": "ADDED", "object": i} for i in items]
                pos = int(cur)
            else:
                try:
                    pos = int(rv)
                except ValueError:
                    pos = -1
                if pos < STORE.compacted or pos < 0:
                    pending = [{"type": "ERROR", "object": status_obj(
                        410, "Expired", f"too old resource version: {rv} ({STORE.compacted + 1})")}]
                    pos = None
                else:
                    pending = []
        last_bookmark = time.monotonic()
        try:
            for ev in pending:
                self._chunk(ev)
            while pos is not None and time.monotonic() < deadline:
                out = []
                with STORE.lock:
                    if STORE.epoch != epoch:
                        break
                    if pos < STORE.compacted:
                        out.append({"type": "ERROR", "object": status_obj(
                            410, "Expired", "too old resource version")})
                        pos = None
                    else:
                        start = bisect.bisect_right(STORE.events, pos, key=lambda e: e[0])
                        for erv, eres, typ, obj in STORE.events[start:]:
                            if eres != res:
                                continue
                            if ns is not None and obj["metadata"].get("namespace") != ns:
                                continue
                            if not label_match(sel, obj["metadata"].get("labels")) or not field_match(fsel, obj):
                                continue
                            out.append({"type": typ, "object": obj})
                        pos = max(pos, STORE.rv)
                        if not out:
                            STORE.lock.wait(0.25)
                for ev in out:
                    self._chunk(ev)
                if bookmarks and pos is not None and time.monotonic() - last_bookmark > 0.5:
                    last_bookmark = time.monotonic()
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": RESOURCES[res][0], "apiVersion": api_version(res),
                        "metadata": {"resourceVersion": str(pos)}}})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True

    def _fake(self, method, path, q):
        if path == "/fake/compact":
            with STORE.lock:
                STORE.compacted = STORE.rv
                STORE.events = []
                STORE.lock.notify_all()
        elif path == "/fake/disconnect":
            with STORE.lock:
                STORE.epoch += 1
                STORE.lock.notify_all()
        elif path == "/fake/conflicts":
            with STORE.lock:
                STORE.conflicts = int(q.get("n", "0"))
        elif path == "/fake/slow":
            STORE.slow_ms = int(q.get("ms", "0"))
        elif path == "/fake/stats":
            with STORE.lock:
                return self._send(200, {"stats": dict(STORE.stats), "rv": STORE.rv,
                                        "compacted": STORE.compacted, "objects": len(STORE.objects),
                                        "conflicts_left": STORE.conflicts})
        else:
            raise ApiError(404, "NotFound", "no such hook")
        self._send(200, {"ok": True})

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token", default="")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--admin-token", default="", help="a token RBAC does not restrict (the tests)")
    ap.add_argument("--rbac", help="JSON list of rules ({apiGroups, resources, verbs, "
                    "resourceNames?, namespace?}) the token is limited to")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.token = a.token
    srv.admin_token = a.admin_token
    srv.rbac = None
    if a.rbac:
        with open(a.rbac) as f:
            srv.rbac = json.load(f)
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    print(port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
