#!/usr/bin/env node
// gen_image_goldens.js — the ids of conversations with images (K3_VISION.md §5.2-5.3),
// computed by tiktoken itself (npm `tiktoken`, WASM) over tests/tok/tiny, from an
// independent transcription of build_chat_segments with image parts: an image part is one
// structural segment (specials on)
//   <|media_begin|>image {W}x{H}<|media_content|><|media_pad|><|media_end|>
// (W x H the original size), its pad then written N times, N = (gh/2)(gw/2) from the
// patch budget rule of §2.2 (computed here again); parts are concatenated with no separator.
//
//   cd tools/tok && node gen_image_goldens.js > ../../tests/images/chat_ids.txt
//
// Lines: NAME IDS (comma-separated), read by tests/sh/image_chat.sh.
'use strict';
const { tinyEncoder } = require('./tiny_tok.js');
const { enc, specials } = tinyEncoder();
const PAD = specials['<|media_pad|>'];

// §2.2: rows N of an original W x H
function rows(w, h) {
  const p = 14, f = 28;
  const s1 = Math.sqrt(65536 / (Math.max(1, Math.floor(w / p)) * Math.max(1, Math.floor(h / p))));
  const scale = Math.min(1, s1, 7168 / w, 7168 / h);
  const nw = Math.min(Math.max(1, Math.trunc(w * scale)), 7168);
  const nh = Math.min(Math.max(1, Math.trunc(h * scale)), 7168);
  const gw = (nw + (f - nw % f) % f) / p, gh = (nh + (f - nh % f) % f) / p;
  return (gh / 2) * (gw / 2);
}

const M = (s) => [s, true], T = (s) => [s, false];
const open = (tag, role) => [M('<|open|>'), T(tag),
  ...(role ? [T(' role'), T('="'), T(role), T('"')] : []), M('<|sep|>')];
const close = (tag) => [M('<|close|>'), T(tag), M('<|sep|>')];
// a part: a string (text) or [W, H] (an image)
const IMG = (w, h) => ['IMG', w, h];
function build(msgs) {    // thinking off, generation prompt
  let s = [];
  for (const m of msgs) {
    s.push(...open('message', m.role));
    if (m.role === 'assistant') s.push(...open('response'), T(m.content), ...close('response'));
    else for (const p of (typeof m.content === 'string' ? [m.content] : m.content))
      s.push(typeof p === 'string' ? T(p) : ['IMG', p[1], p[2]]);
    s.push(...close('message'), M('<|end_of_msg|>'));
  }
  s.push(...open('message', 'assistant'), ...open('response'));
  return s.filter((g) => g[0] === 'IMG' || g[0].length > 0);
}
function encode(segs) {
  const ids = [];
  for (const g of segs) {
    if (g[0] === 'IMG') {
      const e = enc.encode(`<|media_begin|>image ${g[1]}x${g[2]}<|media_content|>` +
                           '<|media_pad|><|media_end|>', 'all');
      for (const id of e) {
        if (id !== PAD) ids.push(id);
        else for (let r = 0; r < rows(g[1], g[2]); r++) ids.push(PAD);
      }
    } else for (const id of enc.encode(g[0], g[1] ? 'all' : [])) ids.push(id);
  }
  return ids;
}
// the corpus files the test sends: png_rgba8.png 19x13, jpg_prog_420.jpg 48x40,
// big_rgb_wide.png 7301x23 (resized by the budget; the prompt says the original size)
const A = IMG(19, 13), B = IMG(48, 40), W = IMG(7301, 23);
const SYS = 'You look at pictures.';
const cases = [
  // k3 MODEL --prompt 'What is this?' --image png_rgba8.png: the image first
  ['run_one', [{ role: 'user', content: [A, 'What is this?'] }]],
  // --system-file, two images at their placeholders in the text
  ['run_two_placed', [{ role: 'system', content: SYS },
    { role: 'user', content: ['Compare ', B, ' with ', W, '.'] }]],
  // chat: /image on the first turn, text only on the second, /image on the third
  ['chat_three', [{ role: 'user', content: [A, 'Hi'] }, { role: 'assistant', content: '@' },
    { role: 'user', content: 'More' }, { role: 'assistant', content: '@' },
    { role: 'user', content: [B, 'And this?'] }]],
];
for (const [name, msgs] of cases) console.log(name + ' ' + encode(build(msgs)).join(','));
enc.free();
