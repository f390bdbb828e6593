"""Creates CloudFormation stacks in moto, in order, and prints what was created as JSON.

Usage: python3 deploy.py <endpoint URL> <stack name>=<template file> ...

Output (stdout): {"<stack>": {"status", "reason", "outputs": {key: value},
"resources": [{"logicalId", "physicalId", "type", "status", "reason"}]}}. A stack that does not
reach CREATE_COMPLETE stops the run; its resources (with the failure reasons) are still printed.
"""
import json
import sys
import time

import boto3

endpoint, *stacks = sys.argv[1:]
cloudformation = boto3.client(
    "cloudformation",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="offline",
    aws_secret_access_key="offline",
)

result = {}
for spec in stacks:
    name, path = spec.split("=", 1)
    with open(path, encoding="utf8") as template:
        body = template.read()
    cloudformation.create_stack(
        StackName=name,
        TemplateBody=body,
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    deadline = time.monotonic() + 300
    while True:
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("IN_PROGRESS") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    resources = []
    paginator = cloudformation.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=name):
        for summary in page["StackResourceSummaries"]:
            resources.append({
                "logicalId": summary["LogicalResourceId"],
                "physicalId": summary.get("PhysicalResourceId"),
                "type": summary["ResourceType"],
                "status": summary["ResourceStatus"],
                "reason": summary.get("ResourceStatusReason"),
            })
    result[name] = {
        "status": stack["StackStatus"],
        "reason": stack.get("StackStatusReason"),
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        "resources": resources,
    }
    if stack["StackStatus"] != "CREATE_COMPLETE":
        break

json.dump(result, sys.stdout)
