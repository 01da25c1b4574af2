// Validates Kubernetes objects against CRD openAPIV3Schemas with ajv (draft-07 semantics; the
// x-kubernetes-* extensions are not JSON-schema keywords and are ignored in non-strict mode).
// stdin: {"schemas": {"<apiVersion>/<kind>": schema}, "objects": [obj...]}
// stdout: [{"kind", "name", "valid", "errors": [...]}]
'use strict';
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addFormat('int32', { type: 'number', validate: (x) => Number.isInteger(x) && x >= -2147483648 && x <= 2147483647 });
ajv.addFormat('int64', { type: 'number', validate: (x) => Number.isInteger(x) });

let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const { schemas, objects } = JSON.parse(input);
  const compiled = {};
  for (const [k, s] of Object.entries(schemas)) compiled[k] = ajv.compile(s);
  const out = objects.map((o) => {
    const key = `${o.apiVersion}/${o.kind}`;
    const v = compiled[key];
    if (!v) return { kind: o.kind, name: (o.metadata || {}).name, valid: false, errors: [`no schema for ${key}`] };
    const ok = v(o);
    return {
      kind: o.kind,
      name: (o.metadata || {}).name,
      valid: ok,
      errors: ok ? [] : v.errors.map((e) => `${e.instancePath || '/'} ${e.message}`),
    };
  });
  process.stdout.write(JSON.stringify(out));
});
