import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_FILE_TRANSFERS, FileTransferSlots, maxFileTransfersFor } from "#local-mode/file-transfer-slots";

/**
 * Local mode's cap on File Store transfers in flight: each holds a file open beside its connection,
 * so without it slow uploads could take the descriptors the server keeps for itself.
 */
describe("the File Store's transfer slots", () => {
  it("are an eighth of the open-files limit, from 16 to 1,024", () => {
    expect(maxFileTransfersFor(20_000)).toBe(1024);
    expect(maxFileTransfersFor(4096)).toBe(512);
    expect(maxFileTransfersFor(1024)).toBe(128);
    expect(maxFileTransfersFor(64)).toBe(16);
    expect(maxFileTransfersFor(undefined)).toBe(DEFAULT_MAX_FILE_TRANSFERS);
  });

  it("give one project at most half, all projects at most the cap, and take each slot back once", () => {
    const slots = new FileTransferSlots(4);
    const a1 = slots.take("proj_a");
    const a2 = slots.take("proj_a");
    expect([a1, a2].every(Boolean)).toBe(true);
    expect(slots.take("proj_a")).toBeUndefined();
    const b1 = slots.take("proj_b");
    const c1 = slots.take("proj_c");
    expect([b1, c1].every(Boolean)).toBe(true);
    expect(slots.take("proj_d")).toBeUndefined();
    expect(slots.inFlight).toBe(4);
    a1?.();
    a1?.();
    expect(slots.inFlight).toBe(3);
    expect(slots.take("proj_b")).toBeDefined();
    expect(slots.take("proj_a")).toBeUndefined();
  });

  it("let a cap of 1 serve one transfer", () => {
    const slots = new FileTransferSlots(1);
    const only = slots.take("proj_a");
    expect(slots.take("proj_b")).toBeUndefined();
    only?.();
    expect(slots.take("proj_b")).toBeDefined();
  });
});
