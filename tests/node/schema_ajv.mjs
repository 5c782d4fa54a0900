// schema_ajv.mjs — the JSON Schema corpus (schema_corpus.json) checked by an independent
// validator, Ajv (JSON Schema 2020-12, with ajv-formats), not by k3's own grammar.
//   node schema_ajv.mjs lines CORPUS SEEDS GEN > batch.jsonl   (k3 --batch lines, one per
//                                                              schema and seed 1..SEEDS)
//   node schema_ajv.mjs check CORPUS OUT                      (k3's batch output: every
//                                                              reply ended and is valid)
// Run from a folder where `npm install ajv ajv-formats` put node_modules.
import fs from 'fs';
import { createRequire } from 'module';

const [mode, corpusFile, a, b] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusFile, 'utf8'));
if (mode === 'lines') {
  for (const c of corpus)
    for (let seed = 1; seed <= Number(a); seed++)
      console.log(JSON.stringify({ id: `${c.name}/${seed}`, prompt: 'Reply with JSON.',
        gen: Number(b), temperature: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name: c.name,
                                                               schema: c.schema } } }));
  process.exit(0);
}
const require = createRequire(process.cwd() + '/');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats');
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const check = {};
for (const c of corpus) check[c.name] = ajv.compile(c.schema);
let n = 0, bad = 0;
const per = {};
for (const line of fs.readFileSync(a, 'utf8').split('\n')) {
  if (!line) continue;
  const r = JSON.parse(line), name = r.id.split('/')[0];
  const text = r.text.replace(/<\|end_of_msg\|>$/, '');
  let ok = false, why = '';
  if (r.stop !== 'eos') why = `stopped by ${r.stop}, not the end token`;
  else {
    try {
      ok = check[name](JSON.parse(text));
      if (!ok) why = ajv.errorsText(check[name].errors);
    } catch (e) { why = 'not JSON: ' + e.message; }
  }
  n++;
  per[name] = (per[name] || 0) + (ok ? 1 : 0);
  if (!ok) { bad++; console.log(`FAIL ${r.id}: ${why}: ${JSON.stringify(text).slice(0, 300)}`); }
}
console.log(Object.entries(per).map(([k, v]) => `${k} ${v}`).join(', '));
if (bad || n !== corpus.length * 20) {
  console.log(`FAIL: ${bad} of ${n} replies invalid (want ${corpus.length * 20}, all valid)`);
  process.exit(1);
}
const ver = (p) => require(p + '/package.json').version;
console.log(`ok ${n} replies under ${corpus.length} schemas valid by Ajv ${ver('ajv')} + ` +
            `ajv-formats ${ver('ajv-formats')}`);
