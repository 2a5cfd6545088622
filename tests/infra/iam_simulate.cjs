// Decides requests against IAM policies with @cloud-copilot/iam-simulate (every condition
// operator, explicit and implicit denies, and each action, resource type and context key
// checked against AWS's own service reference). Reads one JSON document on stdin:
//   {"roles": {NAME: [policy, ...]}, "resourcePolicies": {ARN: policy},
//    "requests": [{"role", "action", "resource", "context", "resourcePolicy", "service"?}]}
// A request with "service" (e.g. "sns.amazonaws.com") is made by that AWS service principal,
// which has no identity policies: only the resource policy can allow it.
// and writes one answer per request on stdout, in order:
//   {"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "error", "why": ...}
const { runSimulation } = require('@cloud-copilot/iam-simulate')

const ACCOUNT = process.env.IAM_SIMULATE_ACCOUNT

async function main() {
  let text = ''
  for await (const chunk of process.stdin) text += chunk
  const input = JSON.parse(text)
  const answers = []
  for (const request of input.requests) {
    const policies = request.service
      ? []
      : input.roles[request.role].map((policy, i) => ({ name: `p${i}`, policy }))
    const simulation = {
      request: {
        principal: request.service || `arn:aws:iam::${ACCOUNT}:role/${request.role}`,
        action: request.action,
        resource: { resource: request.resource, accountId: ACCOUNT },
        contextVariables: request.context,
      },
      identityPolicies: policies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    }
    const resourcePolicy = request.resourcePolicy && input.resourcePolicies[request.resourcePolicy]
    if (resourcePolicy) simulation.resourcePolicy = resourcePolicy
    const out = await runSimulation(simulation, {})
    if (out.resultType === 'error') {
      answers.push({ result: 'error', why: out.errors })
    } else if (out.resultType === 'single') {
      answers.push({
        result: out.overallResult,
        why: { ignoredContextKeys: out.result.ignoredContextKeys, resourceType: out.result.resourceType },
      })
    } else {
      answers.push({ result: 'error', why: `a ${out.resultType} result for one resource` })
    }
  }
  process.stdout.write(JSON.stringify(answers))
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err))
  process.exit(1)
})
