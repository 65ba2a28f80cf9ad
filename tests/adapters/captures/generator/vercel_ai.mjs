import { trace, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import fs from 'node:fs';

const [,, scenario, outdir, baseURL] = process.argv;
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'gen-vercel-ai' }),
  spanProcessors: [new SimpleSpanProcessor(exporter)] });
trace.setGlobalTracerProvider(provider);
const tracer = provider.getTracer('ai');
const openai = createOpenAI({ baseURL, apiKey: 'sk-test' });
const model = openai.chat('gpt-4o-mini');
const SYSTEM = 'You are a terse assistant.';
const telemetry = { isEnabled: true, functionId: 'terse-agent', tracer, metadata: { userId: 'u-1' } };
if (scenario === 'S1') {
  await generateText({ model, system: SYSTEM, prompt: 'What is the capital of France?', experimental_telemetry: telemetry });
} else if (scenario === 'S2') {
  await generateText({ model, system: SYSTEM, messages: [
    { role: 'user', content: 'My name is Ada.' }, { role: 'assistant', content: 'Nice to meet you, Ada.' },
    { role: 'user', content: 'What is my name?' }], experimental_telemetry: telemetry });
} else if (scenario === 'S3') {
  await generateText({ model, system: SYSTEM, prompt: 'What is the weather in Paris?', stopWhen: stepCountIs(3),
    tools: { get_weather: tool({ description: 'weather', inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => 'sunny and 21 degrees Celsius' }) }, experimental_telemetry: telemetry });
} else if (scenario === 'S4') {
  const r = streamText({ model, system: SYSTEM, prompt: 'Count from one to five.', experimental_telemetry: telemetry });
  for await (const _ of r.textStream) {}
  await r.text;
}
await provider.forceFlush();
fs.mkdirSync(outdir, { recursive: true });
const spans = exporter.getFinishedSpans();
fs.writeFileSync(`${outdir}/${scenario}.pb`, ProtobufTraceSerializer.serializeRequest(spans));
console.log(scenario, spans.map(s => s.name).join(', '));
