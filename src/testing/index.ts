/**
 * multiloop/testing: loops on a virtual clock, for tests that take no real time.
 */
export { VirtualClockLoop, type VirtualClockLoopOptions } from './virtual-clock-loop.js';
export { simulate, explore, SimulationError, type SimulationOptions, type SimulationResult, type SimulationEvent, type Faults, type Exploration } from './simulate.js';
export { SimulatedFault } from './simulated-fault.js';
