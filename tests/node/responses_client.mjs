// responses_client.mjs — k3 serve's /v1/responses through the official OpenAI Node client
// (npm `openai`, client.responses), run by responses_client.sh: a response, the same one
// streamed (the client's own stream helper and a raw event iteration must equal it), the
// 400 the client raises naming the field, previous_response_id after store: true, and,
// against a server whose reply is a fixed function call (K3_TOOL_URL), a function-call
// round trip streamed and not: the function_call item, its function_call_output sent back
// with the output items, the next turn; against tiny5_vision (K3_VIS_URL), an input_image
// part (a data: URL of K3_IMAGE): the reply of its chat twin (sent first), resumed whole from
// the twin's kept state, streamed the same, continued by previous_response_id (the image's
// prefix resumed), and a file_id a BadRequestError. Prints one line per check and "N passed,
// N failed".
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

let passed = 0, failed = 0;
function check(ok, what, detail) {
  if (ok) { passed++; console.log(`ok ${what}`); }
  else { failed++; console.log(`FAIL: ${what}${detail ? ': ' + detail : ''}`); }
}
const client = (url) => new OpenAI({ baseURL: url + '/v1', apiKey: 'k3-test', maxRetries: 0,
                                     timeout: 120000 });
const j = JSON.stringify;
const c = client(process.env.K3_URL);
const model = process.env.K3_MODEL || 'tiny5';
const reasoning = (r) => r.output.filter((i) => i.type === 'reasoning')
  .map((i) => i.summary.map((s) => s.text).join('')).join('');

try {
  const req = { model, max_output_tokens: 16, temperature: 0, instructions: 'You are terse.',
                input: 'Hello there' };
  const r = await c.responses.create(req);
  check(r.object === 'response' && /^resp_/.test(r.id) && typeof r.output_text === 'string' &&
        ['completed', 'incomplete'].includes(r.status), 'responses.create', j(r));
  check(r.usage && r.usage.output_tokens > 0 && r.usage.input_tokens > 0 &&
        r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens, 'usage',
        j(r.usage));

  const s = c.responses.stream(req);
  const f = await s.finalResponse();
  check(f.output_text === r.output_text && reasoning(f) === reasoning(r) &&
        f.usage.output_tokens === r.usage.output_tokens,
        'streamed (the client\'s finalResponse) equals the non-streamed', `${j(f)} vs ${j(r)}`);
  const events = [];
  let joined = '';
  for await (const e of await c.responses.create({ ...req, stream: true })) {
    events.push(e.type);
    if (e.type === 'response.output_text.delta') joined += e.delta;
  }
  check(joined === r.output_text, 'stream: output_text deltas joined = output_text', joined);
  check(events[0] === 'response.created' && /^response\.(completed|incomplete)$/
        .test(events[events.length - 1]) && events.includes('response.output_item.added'),
        'stream events', j(events));

  let status = 0;
  try { await c.responses.create({ model, input: 'x', tools: [{ type: 'web_search' }] }); }
  catch (e) {
    status = e.status;
    check(e instanceof OpenAI.BadRequestError && /web_search/.test(e.message),
          'a built-in tool: a BadRequestError naming it', e.message);
  }
  check(status === 400, 'a built-in tool: status 400', String(status));

  const p1 = await c.responses.create({ ...req, store: true, reasoning: { effort: 'none' } });
  const p2 = await c.responses.create({ ...req, reasoning: { effort: 'none' },
                                        previous_response_id: p1.id, input: 'And then?' });
  check(p2.previous_response_id === p1.id && p2.usage.input_tokens > p1.usage.input_tokens &&
        p2.usage.input_tokens_details.cached_tokens >= p1.usage.input_tokens,
        'previous_response_id continues a stored response', j(p2));
  status = 0;
  try { await c.responses.create({ ...req, previous_response_id: p2.id }); }
  catch (e) { status = e.status; }
  check(status === 404, 'previous_response_id of a response not stored: 404', String(status));

  if (process.env.K3_TOOL_URL) {
    const t = client(process.env.K3_TOOL_URL);
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather.', strict: false,
                     parameters: { type: 'object', properties: { city: { type: 'string' } },
                                   required: ['city'] } }];
    for (const streamed of [false, true]) {
      const how = streamed ? 'streamed' : 'not streamed';
      const input = [{ role: 'user', content: 'Weather in Paris?' }];
      let cached = 0;
      for (let k = 0; k < 2; k++) {
        const q = { model, max_output_tokens: 200, temperature: 0, tools, input,
                    tool_choice: 'auto' };
        const a = streamed ? await t.responses.stream(q).finalResponse()
                           : await t.responses.create(q);
        const call = a.output.find((i) => i.type === 'function_call');
        check(call && call.name === 'get_weather' && JSON.parse(call.arguments).city === 'Paris'
              && reasoning(a) === 'Calling.', `turn ${k + 1} (${how}): a function_call`, j(a));
        if (k) check(a.usage.input_tokens_details.cached_tokens > cached,
                     `turn 2 (${how}) resumes turn 1`, j(a.usage));
        cached = a.usage.input_tokens;
        input.push(...a.output);
        input.push({ type: 'function_call_output', call_id: call.call_id,
                     output: '18C and sunny' });
      }
    }
  }

  if (process.env.K3_VIS_URL) {
    const v = client(process.env.K3_VIS_URL);
    const url = 'data:image/png;base64,' + readFileSync(process.env.K3_IMAGE).toString('base64');
    const twin = await v.chat.completions.create({ model, max_tokens: 5, temperature: 0,
      reasoning_effort: 'none', messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is this?' }] }] });
    const ri = { model, max_output_tokens: 5, temperature: 0, reasoning: { effort: 'none' },
                 input: [{ role: 'user', content: [
                   { type: 'input_image', image_url: url, detail: 'auto' },
                   { type: 'input_text', text: 'What is this?' }] }] };
    const a = await v.responses.create(ri);
    const n = twin.usage.prompt_tokens;
    check(a.output_text === twin.choices[0].message.content && n === 54 &&
          a.usage.input_tokens === n && a.usage.input_tokens_details.cached_tokens === n,
          `an input_image part (data: URL): the chat twin's reply ${j(a.output_text)}, all ` +
          `${n} prompt ids from its kept state`, `${j(a)} vs ${j(twin)}`);
    const sa = await v.responses.stream(ri).finalResponse();
    check(sa.output_text === a.output_text, 'the image response streamed: the same text',
          `${j(sa)} vs ${j(a)}`);
    const p1 = await v.responses.create({ ...ri, store: true });
    const p2 = await v.responses.create({ model, max_output_tokens: 5, temperature: 0,
      reasoning: { effort: 'none' }, previous_response_id: p1.id, input: 'And then?' });
    check(p2.usage.input_tokens > n && p2.usage.input_tokens_details.cached_tokens >= n,
          'previous_response_id after an image: its prefix resumed', j(p2.usage));
    status = 0;
    try {
      await v.responses.create({ ...ri, input: [{ role: 'user', content: [
        { type: 'input_image', file_id: 'file-1', detail: 'auto' }] }] });
    } catch (e) {
      status = e.status;
      check(e instanceof OpenAI.BadRequestError && /file_id/.test(e.message),
            'an input_image file_id: a BadRequestError naming it', e.message);
    }
    check(status === 400, 'a file_id: status 400', String(status));
  }
} catch (e) {
  failed++;
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
