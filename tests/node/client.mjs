// client.mjs — k3 serve through the official OpenAI Node client (npm `openai`), run by
// openai_client.sh: a chat completion, the same one streamed (the deltas must concatenate
// to it), a completion (plain and streamed), logprobs, JSON mode, n, and, against a server
// whose reply is a fixed tool call (K3_TOOL_URL), the client's own view of
// message.tool_calls and of the streamed delta.tool_calls; against tiny5_vision (K3_VIS_URL),
// one user message with an image_url part (a data: URL of K3_IMAGE) whose reply equals the
// one-shot `k3 --image` run's text (K3_ONESHOT, its stdout; the CLI writes an ill-formed
// byte as it is, the server each such byte as one U+FFFD, so the CLI's bytes are decoded
// that way, utf8() below, before comparing). Prints one line per check and "N passed, N failed".
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

let passed = 0, failed = 0;
function check(ok, what, detail) {
  if (ok) { passed++; console.log(`ok ${what}`); }
  else { failed++; console.log(`FAIL: ${what}${detail ? ': ' + detail : ''}`); }
}
const client = (url) => new OpenAI({ baseURL: url + '/v1', apiKey: 'k3-test',
                                    maxRetries: 0, timeout: 120000 });
const j = JSON.stringify;
// UTF-8 with every byte outside a well-formed sequence as one U+FFFD (the server's way)
function utf8(b) {
  let out = '';
  for (let i = 0; i < b.length;) {
    const n = b[i] < 0x80 ? 1 : b[i] >= 0xc2 && b[i] < 0xe0 ? 2 : b[i] >= 0xe0 && b[i] < 0xf0 ? 3
      : b[i] >= 0xf0 && b[i] < 0xf5 ? 4 : 0;
    const s = n ? new TextDecoder('utf-8', { fatal: true }) : null;
    let ch = null;
    try {
      if (n && i + n <= b.length) ch = s.decode(b.subarray(i, i + n));
    } catch (e) { ch = null; }
    if (ch === null) { out += '\ufffd'; i++; } else { out += ch; i += n; }
  }
  return out;
}
const c = client(process.env.K3_URL);
const model = process.env.K3_MODEL || 'tiny5';
const messages = [{ role: 'user', content: 'Hello there' }];

try {
  const models = await c.models.list();
  check(models.data.length === 1 && models.data[0].id === model, 'models.list', j(models.data));

  const r = await c.chat.completions.create({ model, messages, temperature: 0, max_tokens: 24 });
  const m = r.choices[0].message;
  check(typeof m.content === 'string' && r.object === 'chat.completion',
        'chat.completions.create', j(r));
  check(r.usage && r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, 'usage',
        j(r.usage));

  const s = await c.chat.completions.create({
    model, messages, temperature: 0, max_tokens: 24, stream: true,
    stream_options: { include_usage: true } });
  let content = '', reasoning = '', finish = null, usage = null;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    const d = ch.choices[0] && ch.choices[0].delta;
    if (!d) continue;
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
  }
  check(content === m.content, 'streamed content equals the non-streamed',
        `${j(content)} vs ${j(m.content)}`);
  check(reasoning === (m.reasoning_content || ''),
        'streamed reasoning_content equals the non-streamed',
        `${j(reasoning)} vs ${j(m.reasoning_content)}`);
  check(finish === r.choices[0].finish_reason, 'streamed finish_reason',
        `${finish} vs ${r.choices[0].finish_reason}`);
  check(usage && usage.completion_tokens === r.usage.completion_tokens, 'stream usage chunk',
        j(usage));

  const prompt = 'The capital of France is';
  const p = await c.completions.create({ model, prompt, max_tokens: 8, temperature: 0 });
  check(typeof p.choices[0].text === 'string' && p.object === 'text_completion',
        'completions.create', j(p));
  const ps = await c.completions.create({ model, prompt, max_tokens: 8, temperature: 0,
                                          stream: true });
  let text = '';
  for await (const ch of ps) if (ch.choices[0]) text += ch.choices[0].text || '';
  check(text === p.choices[0].text, 'streamed completion equals the non-streamed',
        `${j(text)} vs ${j(p.choices[0].text)}`);

  // logprobs (chat and the legacy echo), JSON mode by a schema, n > 1
  const lp = await c.chat.completions.create({ model, messages, temperature: 0, max_tokens: 6,
    logprobs: true, top_logprobs: 2, reasoning_effort: 'none' });
  const lc = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
  check(Array.isArray(lc) && lc.length > 0 && lc.every((e) => typeof e.logprob === 'number' &&
        e.logprob <= 0 && Array.isArray(e.bytes) && e.top_logprobs.length === 2),
        'chat logprobs + top_logprobs', j(lp.choices[0]));
  const ec = await c.completions.create({ model, prompt, max_tokens: 0, echo: true,
                                          logprobs: 1 });
  const el = ec.choices[0].logprobs;
  check(ec.choices[0].text === prompt && el && el.token_logprobs[0] === null &&
        el.tokens.length === el.token_logprobs.length && el.token_logprobs.length > 1,
        'completions echo + logprobs, max_tokens 0', j(ec.choices[0]));
  const schema = { type: 'object', properties: { n: { type: 'integer' },
    c: { enum: ['x', 'yy', 3] } }, required: ['n', 'c'], additionalProperties: false };
  const jr = await c.chat.completions.create({ model, messages, max_tokens: 400, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 't', schema } } });
  let doc = null;
  try { doc = JSON.parse(jr.choices[0].message.content); } catch (e) { doc = null; }
  check(doc && Number.isInteger(doc.n) && ['x', 'yy', 3].includes(doc.c) &&
        Object.keys(doc).length === 2, 'response_format json_schema', j(jr.choices[0]));
  const nn = await c.chat.completions.create({ model, messages, max_tokens: 4, n: 2, seed: 5 });
  check(nn.choices.length === 2 && nn.choices[0].index === 0 && nn.choices[1].index === 1,
        'n: 2 choices', j(nn.choices));

  let status = 0;
  try { await c.chat.completions.create({ model, messages: [], max_tokens: 1 }); }
  catch (e) {
    status = e.status;
    check(e instanceof OpenAI.APIError && /messages/.test(e.message),
          'a 400 is an APIError naming the field', e.message);
  }
  check(status === 400, 'empty messages: status 400', String(status));

  if (process.env.K3_TOOL_URL) {
    const t = client(process.env.K3_TOOL_URL);
    const tools = [{ type: 'function', function: { name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const req = { model, messages, tools, temperature: 0, max_tokens: 200 };
    const tr = await t.chat.completions.create(req);
    const call = tr.choices[0].message.tool_calls && tr.choices[0].message.tool_calls[0];
    check(tr.choices[0].finish_reason === 'tool_calls' && call &&
          call.function.name === 'get_weather' &&
          JSON.parse(call.function.arguments).city === 'Paris', 'message.tool_calls',
          j(tr.choices[0]));
    const ts = await t.chat.completions.create({ ...req, stream: true });
    let name = '', args = '', tfinish = null;
    for await (const ch of ts) {
      const d = ch.choices[0] && ch.choices[0].delta;
      for (const tc of (d && d.tool_calls) || []) {
        if (tc.function && tc.function.name) name += tc.function.name;
        if (tc.function && tc.function.arguments) args += tc.function.arguments;
      }
      if (ch.choices[0] && ch.choices[0].finish_reason) tfinish = ch.choices[0].finish_reason;
    }
    check(name === call.function.name && args === call.function.arguments &&
          tfinish === 'tool_calls', 'streamed delta.tool_calls equal the non-streamed',
          `${name} ${args} ${tfinish}`);
    // the call and a tool message sent back, as an agent loop does
    const back = await t.chat.completions.create({ ...req, max_tokens: 4, messages: [
      ...messages, tr.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: '18C' }] });
    check(back.usage.prompt_tokens_details.cached_tokens >= tr.usage.prompt_tokens,
          'the returned call resumes the previous turn', j(back.usage));
  }

  if (process.env.K3_VIS_URL) {
    const v = client(process.env.K3_VIS_URL);
    const vmodel = (await v.models.list()).data[0].id;
    const url = 'data:image/png;base64,' + readFileSync(process.env.K3_IMAGE).toString('base64');
    const vr = await v.chat.completions.create({ model: vmodel, max_tokens: 5, temperature: 0,
      reasoning_effort: 'none', messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is this?' }] }] });
    const got = vr.choices[0].message.content;
    const want = utf8(readFileSync(process.env.K3_ONESHOT)).replace(/\n$/, '');
    check(got === want && vr.choices[0].finish_reason === 'length' &&
          vr.usage.prompt_tokens === 54,
          `an image_url part (data: URL): the reply equals the one-shot k3 --image run's ` +
          `(${j(got)}, finish_reason ${vr.choices[0].finish_reason}, 54 prompt tokens)`,
          `${j(got)} vs ${j(want)} ${j(vr.usage)}`);
  }
} catch (e) {
  check(false, 'no exception', e && (e.stack || e.message || String(e)));
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
