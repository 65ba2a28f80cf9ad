import { Mastra } from '@mastra/core/mastra';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { Observability } from '@mastra/observability';
import { OtelExporter } from '@mastra/otel-exporter';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const [,, scenario, port, baseURL] = process.argv;
const SYSTEM = 'You are a terse assistant.';
const openai = createOpenAI({ baseURL, apiKey: 'sk-test' });
const get_weather = createTool({ id: 'get_weather', description: 'weather',
  inputSchema: z.object({ city: z.string() }), execute: async () => 'sunny and 21 degrees Celsius' });
const assistant = new Agent({ id: 'assistant', name: 'assistant', instructions: SYSTEM, model: openai.chat('gpt-4o-mini'),
  tools: scenario === 'S3' ? { get_weather } : {} });
const observability = new Observability({ configs: { otel: { serviceName: 'mastra-gen',
  exporters: [new OtelExporter({ provider: { custom: { endpoint: `http://127.0.0.1:${port}/v1/traces`, protocol: 'http/protobuf' } } })] } } });
const mastra = new Mastra({ agents: { assistant }, observability });
const agent = mastra.getAgent('assistant');
if (scenario === 'S1') await agent.generate('What is the capital of France?');
if (scenario === 'S2') await agent.generate([{ role: 'user', content: 'My name is Ada.' }, { role: 'assistant', content: 'Nice to meet you, Ada.' }, { role: 'user', content: 'What is my name?' }]);
if (scenario === 'S3') await agent.generate('What is the weather in Paris?');
if (scenario === 'S4') { const s = await agent.stream('Count from one to five.'); for await (const _ of s.textStream) {} }
await new Promise(r => setTimeout(r, 500));
await observability.shutdown?.();
await mastra.shutdown?.();
console.log('done', scenario);
