/* The one header of our own between `asb serve` and libasb: a SandboxClaim create that adopted a
 * Ready warm member in its own transaction answers with the claim as created (as kube-apiserver
 * would: a watch from its resourceVersion sees the adoption next) and this header, naming the
 * sandbox the claim is already bound to and Ready with, so libasb needs no watch:
 *     Asb-Claim-Sandbox: name=<sandbox name>; uid=<sandbox metadata.uid>
 * (docs/claims.md). */
#pragma once

#define CLAIM_HEADER_SANDBOX "Asb-Claim-Sandbox"
