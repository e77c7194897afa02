// Fails when src/generated/openapi.ts is not what `npm run generate` makes from the
// repository's openapi/openapi.json: the typed client must never drift from the spec.
import { execSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const committed = "src/generated/openapi.ts";
const generate = JSON.parse(readFileSync("package.json", "utf8")).scripts.generate;
if (!generate.includes(`-o ${committed}`)) throw new Error(`the generate script must write ${committed}`);
const dir = mkdtempSync(join(tmpdir(), "engram-types-"));
try {
  const fresh = join(dir, "openapi.ts");
  execSync(`npx --no-install ${generate.replace(`-o ${committed}`, `-o ${fresh}`)}`, { stdio: "pipe" });
  if (readFileSync(fresh, "utf8") !== readFileSync(committed, "utf8")) {
    console.error(`${committed} is stale: openapi/openapi.json changed. Run \`npm run generate\` in clients/typescript.`);
    process.exit(1);
  }
  console.log(`${committed} matches openapi/openapi.json`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
