# ctest's install_package: runtime/cpp (SOURCE) configured, built and installed into a prefix
# under WORK, then the consumer project (CONSUMER) configured against that prefix alone
# (find_package(seqbus) through CMAKE_PREFIX_PATH), built, generating the C++ codecs of IDL
# with seqc (SEQC) through seqbus_generate(), and run: it must print the line checked below.
# Run with cmake -P; every step's failure stops it with the step named.
foreach(var SOURCE CONSUMER IDL WORK SEQC CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(step name)
  message(STATUS "install test: ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${name} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("configure the package" ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/package
     -DSEQBUS_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
step("build the package" ${CMAKE_COMMAND} --build ${WORK}/package)
step("install the package" ${CMAKE_COMMAND} --install ${WORK}/package)
if(NOT EXISTS ${prefix}/include/seqbus/codec/runtime.hpp)
  message(FATAL_ERROR "install test: ${prefix}/include/seqbus/codec/runtime.hpp not installed")
endif()
step("configure the consumer" ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/consumer
     -DCMAKE_PREFIX_PATH=${prefix} -DSEQBUS_SEQC=${SEQC} -DPINGPONG_IDL=${IDL}
     -DCMAKE_CXX_COMPILER=${CXX})
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer)
step("run the consumer" ${WORK}/consumer/consumer)
set(expected "Ping {\"id\":7,\"sent_at_ns\":1700000000000000000} 26 bytes")
string(STRIP "${step_output}" got)
if(NOT got STREQUAL expected)
  message(FATAL_ERROR "install test: the consumer printed\n  ${got}\nnot\n  ${expected}")
endif()
message(STATUS "install test: the consumer built against ${prefix} printed: ${got}")
