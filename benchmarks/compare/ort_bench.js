#!/usr/bin/env node
// Times one ONNX model with ONNX Runtime (the npm package onnxruntime-node) on the CPU.
//
//   node ort_bench.js --model M.onnx --input-name input --input X.npy [--threads N]
//                     [--warmup W] [--min-runs K] [--min-seconds S] [--output OUT.npy]
//
// All graph optimizations on, intraOpNumThreads=N, interOpNumThreads=1, sequential execution.
// Runs W warm-up runs (not timed into the result but the first one is reported as first_ms), then a
// timed loop of at least K runs and at least S seconds, and prints one JSON object on stdout:
// per-run times in ms, their median, the first run, the session's creation time and the process's
// peak resident memory. With --output, writes the first output tensor as a .npy file.
//
// onnxruntime-node is looked up in --ort-dir, else $MODEFLOW_PEERS_CACHE, else
// ~/.cache/modeflow-peers (where tools/install-peers.sh puts it), else node's usual places.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');

function parseArgs(argv) {
  const args = { threads: 1, warmup: 3, minRuns: 30, minSeconds: 2, inputName: 'input' };
  const keys = {
    '--model': 'model', '--input': 'input', '--input-name': 'inputName', '--threads': 'threads',
    '--warmup': 'warmup', '--min-runs': 'minRuns', '--min-seconds': 'minSeconds',
    '--output': 'output', '--ort-dir': 'ortDir',
  };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s);
    if (flag === '-h' || flag === '--help') {
      const text = fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 14);
      console.log(text.map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
      process.exit(0);
    }
    if (!(flag in keys)) fail(`unknown option ${flag} (see --help)`, 2);
    if (value === undefined) {
      if (i + 1 >= argv.length) fail(`${flag} needs a value`, 2);
      value = argv[++i];
    }
    args[keys[flag]] = value;
  }
  for (const k of ['threads', 'warmup', 'minRuns']) args[k] = parseInt(args[k], 10);
  args.minSeconds = parseFloat(args.minSeconds);
  if (!args.model || !args.input) fail('--model and --input are required', 2);
  return args;
}

function fail(message, code = 1) {
  process.stderr.write(`ort_bench: ${message}\n`);
  process.exit(code);
}

function loadOrt(ortDir) {
  const dirs = [ortDir, process.env.MODEFLOW_PEERS_CACHE,
    path.join(os.homedir(), '.cache', 'modeflow-peers')].filter(Boolean);
  for (const dir of dirs) {
    try {
      return createRequire(path.join(path.resolve(dir), 'package.json'))('onnxruntime-node');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  try {
    return require('onnxruntime-node');
  } catch (e) {
    fail(`onnxruntime-node not found in ${dirs.join(', ')} (run tools/install-peers.sh)`, 3);
  }
}

// --- .npy (format 1.0-3.0, little-endian, C order) ----------------------------------------------
const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array], '|u1': ['uint8', Uint8Array],
  '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file} is not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
    .filter((s) => s.length).map(Number);
  if (fortran) fail(`${file}: Fortran-order arrays are not supported`);
  if (!(descr in NPY_TYPES)) fail(`${file}: dtype ${descr} is not supported`);
  const [type, Ctor] = NPY_TYPES[descr];
  const offset = start + headerLen;
  const count = shape.reduce((a, b) => a * b, 1);
  // Copy into an aligned buffer: the data offset need not be a multiple of the element size.
  const bytes = buf.subarray(offset, offset + count * Ctor.BYTES_PER_ELEMENT);
  const data = new Ctor(new Uint8Array(bytes).buffer);
  return { type, data, shape };
}

function writeNpy(file, tensor) {
  const descr = Object.keys(NPY_TYPES).find((k) => NPY_TYPES[k][0] === tensor.type);
  if (!descr) fail(`cannot write a ${tensor.type} tensor as .npy`);
  const dims = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt(args.ortDir);
  const input = readNpy(args.input);

  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  const t0 = nowMs();
  const session = await ort.InferenceSession.create(args.model, options);
  const loadMs = nowMs() - t0;
  const name = args.inputName || session.inputNames[0];
  if (!session.inputNames.includes(name)) {
    fail(`the model has inputs ${session.inputNames.join(', ')}, not '${name}'`);
  }
  const feeds = { [name]: new ort.Tensor(input.type, input.data, input.shape) };

  let firstMs = NaN;
  let result;
  for (let i = 0; i < Math.max(1, args.warmup); i++) {
    const s = nowMs();
    result = await session.run(feeds);
    if (i === 0) firstMs = nowMs() - s;
  }
  const times = [];
  const loopStart = nowMs();
  while (times.length < args.minRuns || nowMs() - loopStart < args.minSeconds * 1000) {
    const s = nowMs();
    result = await session.run(feeds);
    times.push(nowMs() - s);
  }
  const outputName = session.outputNames[0];
  if (args.output) writeNpy(args.output, result[outputName]);

  const version = (ort.env && ort.env.versions && ort.env.versions.common) || null;
  const report = {
    engine: 'onnxruntime-node',
    version,
    model: args.model,
    threads: args.threads,
    warmup: Math.max(1, args.warmup),
    load_ms: loadMs,
    first_ms: firstMs,
    runs: times.length,
    median_ms: median(times),
    min_ms: Math.min(...times),
    times_ms: times,
    output_name: outputName,
    output_dims: result[outputName].dims,
    max_rss_bytes: process.resourceUsage().maxRSS * 1024,
  };
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
