// tiny_tok.js — what the tokenizer generators share: K3's pre-tokenizer pattern (pat_str)
// and the tiny test tokenizer (tests/tok/tiny, its 256 reserved ids named from
// tokenizer_config.json) as a tiktoken encoder.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tiktoken } = require('tiktoken');

const PAT = "[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// { enc, specials (content -> id), N (the ranks) } of tests/tok/tiny
function tinyEncoder() {
  const dir = path.join(__dirname, '..', '..', 'tests', 'tok', 'tiny');
  const model = fs.readFileSync(path.join(dir, 'tiktoken.model'), 'utf8');
  const N = model.trim().split('\n').length;
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const named = {};
  for (const [id, t] of Object.entries(cfg.added_tokens_decoder)) named[+id] = t.content;
  const specials = {};
  for (let i = N; i < N + 256; i++) specials[named[i] || `<|reserved_token_${i}|>`] = i;
  return { enc: new Tiktoken(model, specials, PAT), specials, N };
}

module.exports = { PAT, tinyEncoder };
