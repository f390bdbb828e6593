import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { type AwsPart, lazy, required } from "../composition.ts";
import { SchedulerTimers } from "../scheduler-timers.ts";

/** Sources' timers (EventBridge Scheduler): functions that deploy sources. */
export const part: AwsPart = {
  name: "timers",
  build({ compute, client }) {
    return {
      timers: lazy("the timers", () => {
        const manage = required(compute.manage, "the timers", "compute access");
        return new SchedulerTimers({
          scheduler: client("scheduler", () => new SchedulerClient({})),
          groupName: manage.scheduleGroup,
          timerInvokerArn: manage.timerInvokerArn,
          roleArn: manage.schedulerRoleArn,
        });
      }),
    };
  },
};
