/**
 * multiloop/testing: loops on a virtual clock, for tests that take no real time.
 */
export { VirtualClockLoop, type VirtualClockLoopOptions } from './virtual-clock-loop.js';
