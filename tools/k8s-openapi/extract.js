// Prints, as one JSON object keyed by Kubernetes type name ("io.k8s.api.core.v1.PodSpec"), the
// OpenAPI schemas that the pinned kubernetes-models package carries for the types named on the
// command line and every type they reference ($ref "name#"). scripts/gen-crds.py expands them.
'use strict';
const Module = require('module');
const path = require('path');

const schemas = {};
// The package registers each schema with its validator library; keep the schemas instead.
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === '@kubernetes-models/validate')
    return { register: (id, schema) => { schemas[id] = schema; } };
  return load.call(this, request, ...rest);
};

// io.k8s.api.core.v1.PodSpec -> kubernetes-models/_schemas/IoK8sApiCoreV1PodSpec.js
// (the package's exports map hides _schemas from require by name: load the file itself).
const file = (type) => path.join(__dirname, 'node_modules', 'kubernetes-models', '_schemas',
  type.split('.').map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join('') + '.js');

for (const type of process.argv.slice(2)) require(file(type)).addSchema();
const sorted = {};
for (const k of Object.keys(schemas).sort()) sorted[k] = schemas[k];
process.stdout.write(JSON.stringify(sorted, null, 1) + '\n');
