#!/usr/bin/python3
"""Writes deploy/crds/*.yaml: the CustomResourceDefinitions of the four kinds
(shared/spec/UPSTREAM.md §2.1), v1beta1 served and stored, structural openAPIV3Schema, status
(and for SandboxWarmPool scale) subresources, printer columns. Pod specs, PVC specs and
NetworkPolicy rules are core/v1 types: their subtrees keep unknown fields (the API server of the
cluster validates them when the controller creates the Pod / PVC / NetworkPolicy).

Run: scripts/gen-crds.py (JSON is valid YAML; the files are JSON documents so no YAML library is
needed)."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def s(**kw):
    return {"type": "string", **kw}


def obj(props=None, required=None, **kw):
    o = {"type": "object"}
    if props is not None:
        o["properties"] = props
    if required:
        o["required"] = required
    o.update(kw)
    return o


def free(desc):
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "description": desc}


STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
META = obj({"labels": STRMAP, "annotations": STRMAP})

CONDITION = obj({
    "type": s(maxLength=316, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
    "status": s(enum=["True", "False", "Unknown"]),
    "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
    "lastTransitionTime": s(format="date-time"),
    "reason": s(maxLength=1024),
    "message": s(maxLength=32768),
}, ["type", "status", "lastTransitionTime", "reason", "message"])

CONDITIONS = {"type": "array", "items": CONDITION, "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["type"]}

VCT = obj({
    "metadata": obj({"name": s(), "labels": STRMAP, "annotations": STRMAP}),
    "spec": free("core/v1 PersistentVolumeClaimSpec"),
}, ["metadata"])
VCTS = {"type": "array", "items": VCT, "x-kubernetes-list-type": "atomic"}

POD_TEMPLATE = obj({"metadata": META, "spec": free("core/v1 PodSpec")}, ["spec"],
                   description="Pod template; only labels and annotations of its metadata are used")

BLUEPRINT = {
    "podTemplate": POD_TEMPLATE,
    "volumeClaimTemplates": VCTS,
    "service": {"type": "boolean", "description": "true: headless Service; false: delete an owned one; unset: keep, never create"},
}

SANDBOX = obj({
    "apiVersion": s(), "kind": s(), "metadata": {"type": "object"},
    "spec": obj({
        **BLUEPRINT,
        "shutdownTime": s(format="date-time"),
        "shutdownPolicy": s(enum=["Delete", "Retain"], default="Retain"),
        "operatingMode": s(enum=["Running", "Suspended"], default="Running"),
    }, ["podTemplate"]),
    "status": obj({
        "serviceFQDN": s(), "service": s(), "conditions": CONDITIONS, "selector": s(),
        "podIPs": {"type": "array", "items": s()}, "nodeName": s(),
    }),
}, ["spec"])

POLICY = ["Disallowed", "Allowed", "Overrides"]
TEMPLATE = obj({
    "apiVersion": s(), "kind": s(), "metadata": {"type": "object"},
    "spec": obj({
        **BLUEPRINT,
        "networkPolicy": obj({
            "ingress": {"type": "array", "items": free("networking.k8s.io/v1 NetworkPolicyIngressRule")},
            "egress": {"type": "array", "items": free("networking.k8s.io/v1 NetworkPolicyEgressRule")},
        }),
        "networkPolicyManagement": s(enum=["Managed", "Unmanaged"], default="Managed"),
        "envVarsInjectionPolicy": s(enum=POLICY, default="Disallowed"),
        "volumeClaimTemplatesPolicy": s(enum=POLICY, default="Disallowed"),
    }, ["podTemplate"]),
}, ["spec"])

POOL = obj({
    "apiVersion": s(), "kind": s(), "metadata": {"type": "object"},
    "spec": obj({
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "default": 1},
        "sandboxTemplateRef": obj({"name": s(minLength=1)}, ["name"]),
        "updateStrategy": obj({"type": s(enum=["Recreate", "OnReplenish"], default="OnReplenish")}),
    }, ["sandboxTemplateRef"]),
    "status": obj({
        "replicas": {"type": "integer", "format": "int32"},
        "readyReplicas": {"type": "integer", "format": "int32"},
        "selector": s(),
        "observedGeneration": {"type": "integer", "format": "int64"},
    }),
}, ["spec"])

CLAIM = obj({
    "apiVersion": s(), "kind": s(), "metadata": {"type": "object"},
    "spec": obj({
        "warmPoolRef": obj({"name": s(minLength=1)}, ["name"]),
        "lifecycle": obj({
            "shutdownTime": s(format="date-time"),
            "ttlSecondsAfterFinished": {"type": "integer", "format": "int32", "minimum": 0},
            "shutdownPolicy": s(enum=["Delete", "DeleteForeground", "Retain"], default="Retain"),
        }),
        "additionalPodMetadata": META,
        "env": {"type": "array", "x-kubernetes-list-type": "atomic",
                "items": obj({"name": s(minLength=1), "value": s(), "containerName": s()}, ["name"])},
        "volumeClaimTemplates": VCTS,
    }, ["warmPoolRef"]),
    "status": obj({
        "conditions": CONDITIONS,
        "sandbox": obj({"name": s(), "podIPs": {"type": "array", "items": s()}}),
    }),
}, ["spec"])

AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def crd(group, kind, plural, short, schema, columns, scale=False, status=True):
    version = {"name": "v1beta1", "served": True, "storage": True,
               "schema": {"openAPIV3Schema": schema}, "additionalPrinterColumns": columns + [AGE]}
    sub = {}
    if status:
        sub["status"] = {}
    if scale:
        sub["scale"] = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector"}
    if sub:
        version["subresources"] = sub
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"app.kubernetes.io/name": "agent-sandbox"}},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "listKind": kind + "List", "plural": plural,
                           "singular": kind.lower(), "shortNames": [short]},
                 "versions": [version]},
    }


READY = [{"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
         {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'}]

CRDS = {
    "agents.x-k8s.io_sandboxes": crd("agents.x-k8s.io", "Sandbox", "sandboxes", "sandbox", SANDBOX, READY),
    "extensions.agents.x-k8s.io_sandboxtemplates": crd(
        "extensions.agents.x-k8s.io", "SandboxTemplate", "sandboxtemplates", "sandboxtemplate",
        TEMPLATE, [], status=False),
    "extensions.agents.x-k8s.io_sandboxwarmpools": crd(
        "extensions.agents.x-k8s.io", "SandboxWarmPool", "sandboxwarmpools", "swp", POOL,
        [{"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
         {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"}], scale=True),
    "extensions.agents.x-k8s.io_sandboxclaims": crd(
        "extensions.agents.x-k8s.io", "SandboxClaim", "sandboxclaims", "sandboxclaim", CLAIM,
        [READY[0], {"name": "Sandbox", "type": "string", "jsonPath": ".status.sandbox.name"}, READY[1]]),
}


def main():
    out = os.path.join(ROOT, "deploy", "crds")
    os.makedirs(out, exist_ok=True)
    for name, c in CRDS.items():
        with open(os.path.join(out, name + ".yaml"), "w") as f:
            f.write("# Generated by scripts/gen-crds.py; do not edit.\n")
            json.dump(c, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
