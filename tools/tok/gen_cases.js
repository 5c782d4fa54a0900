#!/usr/bin/env node
// gen_cases.js — oracle test vectors for k3's tokenizer, computed by tiktoken itself
// (npm `tiktoken`: the Rust engine compiled to WASM) with K3's pat_str and K3's 256
// reserved ids, over a vocabulary derived from the o200k_base rank file that the
// package ships.
//
//   cd tools/tok && npm ci && node gen_cases.js [--full DIR]
//
// Writes (all reproducible, byte for byte):
//   tests/tok/o200k_sub/tiktoken.model        first 32768 ranks of o200k_base
//   tests/tok/o200k_sub/tokenizer_config.json  K3's 16 named reserved ids at 32768+offset
//   tests/tok/tiny/tiktoken.model             first 768 ranks (tiny model fixtures)
//   tests/tok/tiny/tokenizer_config.json       the 16 names at 768+offset
//   tests/tok/cases.txt                        the cases and tiktoken's ids
// With --full DIR: also DIR/tiktoken.model + config with all 199998 o200k ranks
// (for tools/bench_tok.sh; not committed).
//
// The Python wrapper's chunking (tokenization_kimi.py, spec §4.6: 400,000-character
// windows, then runs of at most 25,000 str.isspace / non-space characters, each chunk
// encoded separately) is reproduced here because the JS package does not do it.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tiktoken } = require('tiktoken');
const ROOT = path.resolve(__dirname, '..', '..');
const UCD = path.join(__dirname, 'node_modules', '@unicode', 'unicode-16.0.0');

const { PAT } = require('./tiny_tok.js');

// K3's named reserved tokens: offset from n_ranks -> [content, special flag]
const NAMED = [[0, '[BOS]', true], [1, '[EOS]', true], [2, '<|end_of_msg|>', true],
  [3, '<|open|>', false], [4, '<|close|>', false], [5, '<|sep|>', false],
  [6, '[start_header_id]', true], [7, '[end_header_id]', true], [9, '[EOT]', true],
  [18, '<|media_begin|>', true], [19, '<|media_content|>', true], [20, '<|media_end|>', true],
  [21, '<|media_pad|>', true], [65, '<osagent_mode>', true], [254, '[UNK]', true], [255, '[PAD]', true]];
// K2 names that tokenization_kimi.py still lists; a loader must ignore them.
const K2_ADDITIONAL = ['<|im_end|>', '<|im_user|>', '<|im_assistant|>', '<|start_header_id|>',
  '<|end_header_id|>', '[EOT]', '<|im_system|>', '<|im_middle|>'];

function configJson(n) {
  const atd = {};
  for (const [off, content, special] of NAMED)
    atd[String(n + off)] = { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special };
  return JSON.stringify({
    added_tokens_decoder: atd, additional_special_tokens: K2_ADDITIONAL,
    bos_token: '[BOS]', clean_up_tokenization_spaces: false, eos_token: '[EOS]',
    extra_special_tokens: {}, model_max_length: 1048576, pad_token: '[PAD]',
    tokenizer_class: 'TikTokenTokenizer', unk_token: '[UNK]',
    auto_map: { AutoTokenizer: ['tokenization_kimi.TikTokenTokenizer', null] },
  }, null, 2) + '\n';
}
function specialsMap(n) {
  const m = {};
  const named = new Map(NAMED.map(([o, c]) => [o, c]));
  for (let i = 0; i < 256; i++) m[named.get(i) || `<|reserved_token_${n + i}|>`] = n + i;
  return m;
}
function writeVocab(dir, toks, n) {
  fs.mkdirSync(dir, { recursive: true });
  let s = '';
  for (let i = 0; i < n; i++) s += `${toks[i]} ${i}\n`;
  fs.writeFileSync(path.join(dir, 'tiktoken.model'), s);
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), configJson(n));
  return s;
}

// ---- Python str.isspace (Unicode 16.0.0): gc=Zs or bidi class WS, B, S ----
async function pySpaceSet() {
  const S = new Set();
  for (const rel of ['General_Category/Space_Separator', 'Bidi_Class/White_Space',
    'Bidi_Class/Paragraph_Separator', 'Bidi_Class/Segment_Separator'])
    for (const c of (await import(path.join(UCD, rel, 'code-points.mjs'))).default) S.add(c);
  return S;
}

// tokenization_kimi.py TikTokenTokenizer.encode, chunking part, over code points.
function pyChunks(text, isspace) {
  const cps = Array.from(text), out = [];
  for (let w = 0; w < cps.length; w += 400000) {
    const s = cps.slice(w, w + 400000);
    let len = 0, cur = s.length ? isspace(s[0]) : false, start = 0;
    for (let i = 0; i < s.length; i++) {
      const now = isspace(s[i]);
      if (cur !== now) { len = 1; cur = now; }
      else { len++; if (len > 25000) { out.push(s.slice(start, i).join('')); start = i; len = 1; } }
    }
    out.push(s.slice(start).join(''));
  }
  return out;
}

// ---- escaping for cases.txt: printable text stays readable ----
function esc(s) {
  let o = '';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '\\') o += '\\\\';
    else if (ch === '\n') o += '\\n';
    else if (ch === '\r') o += '\\r';
    else if (ch === '\t') o += '\\t';
    else if (c !== 0x20 && /[\p{C}\p{Z}]/u.test(ch)) o += `\\u{${c.toString(16).toUpperCase()}}`;
    else o += ch;
  }
  return o;
}

// ---- seeded PRNG (mulberry32) ----
function rng(seed) {
  return () => { seed |= 0; seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

const { buildCases } = require('./cases_src.js');

(async () => {
  const args = process.argv.slice(2);
  const o200k = require('tiktoken/encoders/o200k_base.json');
  const parts = o200k.bpe_ranks.split(' ');
  if (parts[0] !== '!' || parts[1] !== '0') throw new Error('unexpected o200k_base.json layout');
  const toks = parts.slice(2);
  const fi = args.indexOf('--full');
  if (fi >= 0) { writeVocab(args[fi + 1], toks, toks.length); console.error(`full o200k: ${toks.length} ranks -> ${args[fi + 1]}`); }
  writeVocab(path.join(ROOT, 'tests/tok/tiny'), toks, 768);
  const N = 32768;
  const model = writeVocab(path.join(ROOT, 'tests/tok/o200k_sub'), toks, N);

  const enc = new Tiktoken(model, specialsMap(N), PAT);
  const PYSP = await pySpaceSet();
  const isspace = (ch) => PYSP.has(ch.codePointAt(0));
  const cases = buildCases({ N, rand: rng(20250917), names: Object.keys(specialsMap(N)) });

  const out = [];
  out.push('# k3 tokenizer oracle cases — GENERATED by tools/tok/gen_cases.js, do not edit.');
  out.push(`# oracle: npm tiktoken ${JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules/tiktoken/package.json'))).version} (WASM), K3 pat_str, vocab tests/tok/o200k_sub (${N} ranks + 256 reserved)`);
  out.push('# c NAME MODE | t TEXT | r COUNT TEXT (TEXT repeated) | i IDS. TEXT escapes: \\\\ \\n \\r \\t \\u{HEX}');
  let nids = 0;
  const seen = new Set();
  for (const c of cases) {
    const text = c.segs.map(([k, s]) => s.repeat(k)).join('');
    for (const mode of c.modes || ['plain']) {
      const key = mode + '\0' + text;
      if (seen.has(key)) continue;
      seen.add(key);
      const ids = [];
      for (const ch of pyChunks(text, isspace))
        for (const id of (mode === 'special' ? enc.encode(ch, 'all') : enc.encode_ordinary(ch))) ids.push(id);
      const back = Buffer.from(enc.decode(Uint32Array.from(ids)));
      if (!back.equals(Buffer.from(text, 'utf8'))) throw new Error(`round trip failed: ${c.name}`);
      out.push(`c ${c.name} ${mode}`);
      for (const [k, s] of c.segs) out.push(k === 1 ? `t ${esc(s)}` : `r ${k} ${esc(s)}`);
      out.push(`i ${ids.join(',')}`);
      nids += ids.length;
    }
  }
  out.push('# end');
  fs.writeFileSync(path.join(ROOT, 'tests/tok/cases.txt'), out.join('\n') + '\n');
  console.error(`cases: ${seen.size}, ids: ${nids}`);

  // Split probes: a vocabulary of the first 768 o200k ranks plus, appended, candidate
  // whole pieces. tiktoken emits a piece whole when it is a token, so these ids show
  // the oracle's piece boundaries where merges cannot (e.g. the 'ſ contraction).
  const probeTexts = [], probeToks = new Set();
  for (const w of ['s', 'x', 'DON', 'ſ', 'it', 'A'])
    for (const suf of ['ſ', 'ſa', 's', 'S', 'K', 'k', 'ſſ', 'T', 'ﬅ', 'ẛ'])
      for (const pre of ['', ' ']) {
        const t = pre + w + "'" + suf;
        probeTexts.push(t, t + 'a', t + ' ok');
        for (const cand of [pre + w + "'" + suf, pre + w + "'" + suf.slice(0, 1), pre + w, "'" + suf, "'" + suf + 'a', "'" + suf.slice(0, 1), suf.slice(1), suf.slice(1) + 'a', suf + 'a', "'" + suf.slice(0, 1) + 'a'])
          if (Buffer.byteLength(cand) > 1) probeToks.add(cand);
      }
  const ptoks = toks.slice(0, 768);
  const have = new Set(ptoks);
  for (const c of [...probeToks].sort()) { const b = Buffer.from(c).toString('base64'); if (!have.has(b)) { have.add(b); ptoks.push(b); } }
  const PN = ptoks.length;
  const pmodel = writeVocab(path.join(ROOT, 'tests/tok/probe'), ptoks, PN);
  const penc = new Tiktoken(pmodel, specialsMap(PN), PAT);
  const pout = ['# k3 tokenizer split probes — GENERATED by tools/tok/gen_cases.js, do not edit.',
    `# oracle: npm tiktoken (WASM), K3 pat_str, vocab tests/tok/probe (${PN} ranks: o200k 0..767 + candidate pieces)`];
  probeTexts.forEach((t, i) => { pout.push(`c probe_${i} plain`, `t ${esc(t)}`, `i ${Array.from(penc.encode_ordinary(t)).join(',')}`); });
  pout.push('# end');
  fs.writeFileSync(path.join(ROOT, 'tests/tok/probe_cases.txt'), pout.join('\n') + '\n');
  console.error(`probe cases: ${probeTexts.length}, probe vocab ${PN} ranks`);
  penc.free();
  enc.free();
})();
