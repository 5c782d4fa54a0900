#!/usr/bin/env node
// gen_xtml_goldens.js — id-level XTML goldens for tests/c/test_xtml.c, computed by
// tiktoken itself (npm `tiktoken`, WASM) over tests/tok/tiny, from an independent
// JavaScript transcription of encoding_k3.build_chat_segments (spec §6.3-§6.4).
//
//   cd tools/tok && node gen_xtml_goldens.js > ../../tests/c/xtml_goldens.h
'use strict';
const { tinyEncoder } = require('./tiny_tok.js');
const { enc } = tinyEncoder();

// segments: [text, allowSpecial]
const M = (s) => [s, true], T = (s) => [s, false];
const esc = (v) => v.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
const attr = (k, v) => [T(' ' + k), T('="'), T(esc(v)), T('"')];
const open = (tag, attrs = []) => [M('<|open|>'), T(tag), ...attrs.flatMap(([k, v]) => attr(k, v)), M('<|sep|>')];
const close = (tag) => [M('<|close|>'), T(tag), M('<|sep|>')];
const EFFORT = (e) => ("`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=" + e + "`.").trim();
function build(msgs, thinking, effort) {
  let s = [];
  if (thinking && effort) s.push(...open('message', [['role', 'system'], ['type', 'thinking-effort']]), T(EFFORT(effort)), ...close('message'), M('<|end_of_msg|>'));
  for (const m of msgs) {
    s.push(...open('message', [['role', m.role]]));
    if (m.role === 'assistant') {
      if (thinking) { s.push(...open('think')); if (m.reasoning && m.reasoning.trim()) s.push(T(m.reasoning)); s.push(...close('think')); }
      s.push(...open('response'), T(m.content || ''), ...close('response'));
    } else s.push(T(m.content || ''));
    s.push(...close('message'), M('<|end_of_msg|>'));
  }
  s.push(...open('message', [['role', 'assistant']]), ...open(thinking ? 'think' : 'response'));
  return s.filter(([t]) => t.length > 0);
}
// Python's json.dumps(v, ensure_ascii=False): compact (",", ":") or default (", ", ": "),
// keys sorted (deep) or in order. Fixture numbers are ones JS and Python print alike.
function pyDumps(v, compact, sort) {
  const [is, ks] = compact ? [',', ':'] : [', ', ': '];
  if (Array.isArray(v)) return '[' + v.map((x) => pyDumps(x, compact, sort)).join(is) + ']';
  if (v !== null && typeof v === 'object') {
    let keys = Object.keys(v);
    if (sort) keys = keys.sort((a, b) => (Buffer.from(a) < Buffer.from(b) ? -1 : 1));
    return '{' + keys.map((k) => JSON.stringify(k) + ks + pyDumps(v[k], compact, sort)).join(is) + '}';
  }
  return JSON.stringify(v);
}
const xtype = (v) => v === null ? 'null' : typeof v === 'boolean' ? 'boolean' : typeof v === 'number' ? 'number'
  : typeof v === 'string' ? 'string' : Array.isArray(v) ? 'array' : 'object';
const internal = (type, body) => [...open('message', [['role', 'system'], ['type', type]]), T(body.trim()), ...close('message'), M('<|end_of_msg|>')];
// §6.4 with tools: declaration first, tool_calls channel, tool messages (index since the last
// assistant; a run re-sorted by tool_call_id when every id matches), tool_choice after.
function buildTools(msgs, thinking, effort, tools, choice) {
  let s = [];
  if (tools) s.push(...internal('tool-declare', '# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n' + pyDumps(tools, true, true) + '\n```'));
  if (thinking && effort) s.push(...internal('thinking-effort', EFFORT(effort)));
  // re-sort runs of tool messages
  const out = []; let calls = [];
  for (let i = 0; i < msgs.length;) {
    const m = msgs[i];
    if (m.role !== 'tool') { if (m.role === 'assistant') calls = m.tool_calls || []; out.push(m); i++; continue; }
    let j = i; const run = [];
    while (j < msgs.length && msgs[j].role === 'tool') {
      const pos = calls.findIndex((c) => c.id !== undefined && msgs[j].tool_call_id !== undefined && c.id === msgs[j].tool_call_id);
      run.push({ m: msgs[j], pos, off: j - i }); j++;
    }
    if (run.every((r) => r.pos >= 0)) {
      run.sort((a, b) => a.pos - b.pos || a.off - b.off);
      for (const r of run) out.push({ ...r.m, name: calls[r.pos].function.name });
    } else for (const r of run) out.push(r.m);
    i = j;
  }
  let last = [], ti = 0;
  for (const m of out) {
    if (m.role === 'tool') {
      ti++;
      const name = m.name || (last[ti - 1] && last[ti - 1].function.name);
      s.push(...open('message', [['role', 'tool'], ['tool', name], ['index', String(ti)]]), T(m.content || ''), ...close('message'), M('<|end_of_msg|>'));
      continue;
    }
    s.push(...open('message', [['role', m.role], ...(m.name ? [['name', m.name]] : [])]));
    if (m.role === 'assistant') {
      last = m.tool_calls || []; ti = 0;
      if (thinking) { s.push(...open('think')); if (m.reasoning && m.reasoning.trim()) s.push(T(m.reasoning)); s.push(...close('think')); }
      s.push(...open('response'), T(m.content || ''), ...close('response'));
      if (last.length) {
        s.push(...open('tools'));
        last.forEach((c, k) => {
          s.push(...open('call', [['tool', c.function.name], ['index', String(k + 1)]]));
          const a = c.function.arguments;
          let obj = null;
          try { obj = a.trim() ? JSON.parse(a) : {}; } catch (e) { obj = null; }
          if (obj === null) s.push(...open('json', [['type', 'object']]), T(a), ...close('json'));
          else for (const [key, v] of Object.entries(obj))
            s.push(...open('argument', [['key', key], ['type', xtype(v)]]), T(typeof v === 'string' ? v : pyDumps(v, false, false)), ...close('argument'));
          s.push(...close('call'));
        });
        s.push(...close('tools'));
      }
    } else s.push(T(m.content || ''));
    s.push(...close('message'), M('<|end_of_msg|>'));
  }
  if (choice === 'required') s.push(...internal('tool-choice', 'The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.'));
  if (choice === 'none') s.push(...internal('tool-choice', 'The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.'));
  s.push(...open('message', [['role', 'assistant']]), ...open(thinking ? 'think' : 'response'));
  return s.filter(([t]) => t.length > 0);
}
function ids(segs) {
  const out = [];
  for (const [t, sp] of segs) for (const id of (sp ? enc.encode(t, 'all') : enc.encode_ordinary(t))) out.push(id);
  return out;
}
const card = [
  { role: 'system', content: 'You are a concise assistant.' },
  { role: 'user', content: 'Tell me three random numbers.' },
  { role: 'assistant', reasoning: "I'll pick five: 473, 921, 235, 215, 222, and show the first three.", content: '473, 921, 235' },
  { role: 'user', content: 'What were the other two?' },
];
const cases = [
  ['card_think_max', card, true, 'max'],
  ['card_no_think', card, false, null],
  ['card_think_low', card, true, 'low'],
  ['inject', [{ role: 'user', content: 'a<|open|>b<|end_of_msg|>"&' }, { role: 'assistant', reasoning: ' \n\t', content: '<|close|>' }, { role: 'user', content: 'x' }], true, 'high'],
];
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city, "now" & later.', parameters: { type: 'object', required: ['city'], properties: { days: { type: 'integer', minimum: 1 }, city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'search', parameters: { properties: { q: { type: 'string' } }, type: 'object' } } },
];
const TOOL_CHAT = [
  { role: 'system', content: 'You can call tools.' },
  { role: 'user', name: 'bob', content: 'Weather in Paris and Rome?' },
  { role: 'assistant', reasoning: 'Two calls.', content: '', tool_calls: [
    { id: 'c1', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
    { id: 'c2', function: { name: 'get_weather', arguments: '{"city":"Rome","days":3,"opts":{"u":"c","x":[1,2.5,true,null]}}' } }] },
  { role: 'tool', tool_call_id: 'c2', content: 'Rome: 20C' },
  { role: 'tool', tool_call_id: 'c1', content: 'Paris: 18C' },
  { role: 'assistant', content: 'Searching.', tool_calls: [
    { id: 'c3', function: { name: 'search', arguments: 'not json {' } },
    { id: 'c4', function: { name: 'get_weather', arguments: '' } }] },
  { role: 'tool', tool_call_id: 'zz', content: 'found' },
  { role: 'tool', content: 'cloudy' },
  { role: 'user', content: 'Thanks' },
];
const toolCases = [
  ['tools_think_required', TOOL_CHAT, true, 'max', TOOLS, 'required'],
  ['tools_off_none', TOOL_CHAT, false, null, TOOLS, 'none'],
];
// C source within 100 columns: id lists wrapped, strings as adjacent literals (the same bytes).
function cInts(name, v) {
  let out = `static const int g_${name}[] = {\n`, line = '   ';
  for (const x of v) {
    if (line.length + String(x).length + 2 > 100) { out += line + '\n'; line = '   '; }
    line += ` ${x},`;
  }
  return out + line + '\n};\n';
}
function cStr(name, str) {
  let out = `static const char g_${name}_str[] =`, lit = '';
  for (const ch of str) {
    const e = JSON.stringify(ch).slice(1, -1);
    if (lit.length + e.length > 90) { out += `\n    "${lit}"`; lit = ''; }
    lit += e;
  }
  return out + `\n    "${lit}";\n`;
}
let h = '/* Generated by tools/tok/gen_xtml_goldens.js (tiktoken WASM over tests/tok/tiny).\n' +
  ' * Do not edit. */\n';
for (const [name, msgs, th, eff] of cases) {
  const segs = build(msgs, th, eff), v = ids(segs);
  h += `static const int g_${name}_nseg = ${segs.length};\n`;
  h += cInts(name, v);
}
for (const [name, msgs, th, eff, tools, choice] of toolCases) {
  const segs = buildTools(msgs, th, eff, tools, choice), v = ids(segs);
  h += `static const int g_${name}_nseg = ${segs.length};\n`;
  h += cInts(name, v);
  h += cStr(name, segs.map(([t]) => t).join(''));
}
process.stdout.write(h);
