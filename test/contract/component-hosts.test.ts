/**
 * One `ComponentHost` contract, two hosts: the local one (sandbox child processes) and the AWS one
 * against a Lambda stand-in that runs the real runtime layer and describer in Node processes
 * (`test/support/lambda-stand-in.ts`). The same case gives the same outcome on both.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LambdaComponentHost } from "#adapters/aws/lambda-component-host";
import { bundleComponent, loadEsbuild } from "#adapters/aws/source-bundle";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { DESCRIBER_FUNCTION, startLambdaStandIn } from "../support/lambda-stand-in.ts";
import { componentHostContract } from "./component-host.contract.ts";

componentHostContract(
  "ProcessPoolHost (local sandbox children)",
  async () => {
    const workDir = mkdtempSync(join(tmpdir(), "sluice-host-contract-"));
    const host = new ProcessPoolHost({ workDir, heapMb: 64 });
    return {
      host,
      // Code in the child writes to the host's message channel (fd 4) itself; the runtime's own
      // result for the invocation comes later and is ignored.
      forge: (result) => `fs.writeSync(4, JSON.stringify({ type: "result", result: ${result} }) + "\\n");`,
      close: async () => {
        await host.close();
        rmSync(workDir, { recursive: true, force: true });
      },
    };
  },
  { workflows: true },
);

componentHostContract(
  "LambdaComponentHost (the runtime layer in a Lambda stand-in)",
  async () => {
    const standIn = startLambdaStandIn();
    const esbuild = await loadEsbuild("native");
    const host = new LambdaComponentHost({
      lambda: standIn.lambda,
      stage: "contract",
      invocationTimeoutMs: 10_000,
      waitSeconds: 5,
      deploy: {
        describerFunction: DESCRIBER_FUNCTION,
        bundle: (code) => bundleComponent(code, { esbuild }),
        functions: {
          sourceRoleArn: "arn:aws:iam::123456789012:role/sluice-source",
          runtimeLayerArn: "arn:aws:lambda:eu-west-1:123456789012:layer:sluice-runtime:1",
        },
      },
    });
    return {
      host,
      // Lambda's runtime client serialises the handler's answer with the process's JSON.stringify,
      // which code in the function can replace, as it can post an answer to the Runtime API itself.
      forge: (result) => `{
      const stringify = JSON.stringify;
      const forged = ${result};
      JSON.stringify = (value, ...rest) =>
        value && value.invocationId === forged.invocationId ? stringify(forged) : stringify(value, ...rest);
    }`,
      close: async () => standIn.close(),
    };
  },
  { workflows: true },
);
