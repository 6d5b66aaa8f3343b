import { Stack, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { managedInstancesShape, type StageSettings } from './stage';

/** Properties of {@link ManagedInstances}. */
export interface ManagedInstancesProps {
  /** The stage's settings: `managedInstances`, the table prefix, log retention and removal policy. */
  readonly stage: StageSettings;
}

/** Where the gateway's environments send traffic, and the one port they use for all of it. */
const HTTPS = ec2.Port.tcp(443);

/**
 * The gateway's compute on Lambda Managed Instances: a VPC, a capacity provider that runs EC2
 * instances in the VPC's private subnets, and {@link ManagedInstances.attach}, which puts a
 * function on it. Built only for a stage whose `compute` is `managed-instances`.
 *
 * The VPC: one public and one private subnet in each of `availabilityZones` zones (three by
 * default, matching the three environments Lambda spreads over zones); `natGateways` NAT gateways
 * in the public subnets, the instances' only way out to providers and to AWS's APIs (Secrets
 * Manager, CloudWatch Logs, Lambda's own); a gateway endpoint for DynamoDB (free, and it keeps
 * every admission and settlement off the NAT gateways' per-GB fee), whose policy reaches the
 * stage's tables only; and a flow log of rejected traffic. No inbound rule anywhere: nothing
 * connects to the instances, Lambda routes invocations to them itself.
 *
 * The capacity provider: arm64, the stage's instance types, its vCPU ceiling, Lambda's automatic
 * scaling, system logs in a log group with the stage's retention. Its operator role is AWS's
 * managed `AWSLambdaManagedEC2ResourceOperator` policy, the one AWS documents and updates as the
 * service grows (acknowledged in `lib/nag.ts`). All functions on one capacity provider must trust
 * each other (AWS: the capacity provider is the security boundary); only the gateway runs here.
 */
export class ManagedInstances extends Construct {
  /** The VPC the instances run in. */
  public readonly vpc: ec2.Vpc;
  /** The instances' security group: HTTPS out, nothing in. */
  public readonly securityGroup: ec2.SecurityGroup;
  /** The capacity provider. */
  public readonly capacityProvider: lambda.CapacityProvider;
  private readonly stage: StageSettings;

  public constructor(scope: Construct, id: string, props: ManagedInstancesProps) {
    super(scope, id);
    const { stage } = props;
    this.stage = stage;
    const m = stage.managedInstances;

    const flowLogs = new logs.LogGroup(this, 'FlowLogs', { retention: stage.logRetention, removalPolicy: stage.removalPolicy });
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: m.availabilityZones,
      natGateways: m.natGateways,
      subnetConfiguration: [
        // Public subnets hold only the NAT gateways.
        { name: 'Public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24, mapPublicIpOnLaunch: false },
        // Room for instances: a /20 per zone is 4,091 addresses, far above any fleet a stage allows.
        { name: 'Instances', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 20 },
      ],
      // Only what was refused: the accepted flows are the gateway's own calls to providers and AWS,
      // while a refused one shows a provider on a port the security group does not open.
      flowLogs: {
        Rejected: { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs), trafficType: ec2.FlowLogTrafficType.REJECT },
      },
    });

    const dynamo = this.vpc.addGatewayEndpoint('DynamoDb', {
      service: ec2.GatewayVpcEndpointAwsService.DYNAMODB,
      subnets: [{ subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS }],
    });
    // Whatever a role in this VPC may do, through this endpoint it reaches the stage's tables only.
    const tableArn = Stack.of(this).formatArn({ service: 'dynamodb', resource: 'table', resourceName: `${stage.tablePrefix}*` });
    dynamo.addToPolicy(
      new iam.PolicyStatement({
        principals: [new iam.AnyPrincipal()],
        actions: ['dynamodb:*'],
        resources: [tableArn, `${tableArn}/index/*`],
      }),
    );

    this.securityGroup = new ec2.SecurityGroup(this, 'Instances', {
      vpc: this.vpc,
      description: `Sluice ${stage.name}: gateway instances (HTTPS out to providers and AWS, nothing in)`,
      allowAllOutbound: false,
    });
    // Providers and AWS's endpoints are all HTTPS; DNS and the instance metadata service are
    // link-local and never pass a security group.
    this.securityGroup.addEgressRule(ec2.Peer.anyIpv4(), HTTPS, 'HTTPS to providers and AWS APIs');

    const systemLogs = new logs.LogGroup(this, 'CapacityProviderLogs', { retention: stage.logRetention, removalPolicy: stage.removalPolicy });
    this.capacityProvider = new lambda.CapacityProvider(this, 'CapacityProvider', {
      subnets: this.vpc.privateSubnets,
      securityGroups: [this.securityGroup],
      architectures: [lambda.Architecture.ARM_64],
      instanceTypeFilter: lambda.InstanceTypeFilter.allow(m.instanceTypes.map((t) => new ec2.InstanceType(t))),
      maxVCpuCount: m.maxVcpus,
      scalingOptions: lambda.ScalingOptions.auto(),
      logGroup: systemLogs,
      // The instances are on the EC2 bill: tagged, they can be told apart there by project and stage.
      propagateTags: lambda.PropagateTags.explicit({ Project: 'Sluice', Stage: stage.name }),
    });
  }

  /**
   * Puts `fn` on the capacity provider with the stage's concurrency, memory ratio and environment
   * bounds, published to `$LATEST.PUBLISHED` on every deploy (an unqualified invocation, its Function
   * URL's included, runs that version on managed instances, not `$LATEST`).
   */
  public attach(fn: lambda.IFunction): void {
    const m = this.stage.managedInstances;
    Validations.of(fn).acknowledge({
      id: 'Annotation::aws-lambda:Function.CapacityProviderConfiguration',
      reason: 'The gateway on managed instances is a function of its own (lib/gateway.ts), so a stage going back to on-demand replaces it rather than removing its capacity provider.',
    });
    this.capacityProvider.addFunction(fn, {
      perExecutionEnvironmentMaxConcurrency: m.perEnvironmentConcurrency,
      executionEnvironmentMemoryGiBPerVCpu: m.memoryGiBPerVcpu,
      publishToLatestPublished: true,
      latestPublishedScalingConfig: { minExecutionEnvironments: m.minEnvironments, maxExecutionEnvironments: m.maxEnvironments },
    });
  }

  /** Variables a function on these instances gets: its worker threads (see {@link managedInstancesShape}). */
  public environment(): Record<string, string> {
    return { AWS_LAMBDA_NODEJS_WORKER_COUNT: String(managedInstancesShape(this.stage.managedInstances).workerThreads) };
  }
}
