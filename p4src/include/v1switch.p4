/* The V1Switch instantiation of the load-balancing programs: the shared
 * parser, checksums and deparser (parsers.p4), the program's MyIngress and
 * routing.p4's MyEgress.  Include at the end of the program. */
#ifndef _TESTBED_V1SWITCH_P4_
#define _TESTBED_V1SWITCH_P4_

V1Switch(CommonParser(),
         CommonVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         CommonComputeChecksum(),
         CommonDeparser()) main;

#endif /* _TESTBED_V1SWITCH_P4_ */
