package io.stallscope.agent;

import java.io.IOException;
import java.io.InputStream;
import java.security.ProtectionDomain;
import java.util.HashMap;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/**
 * The class loader of the agent's core: it defines classes from the bytes of the nested core jar, read
 * in memory once (no temporary file), and delegates everything else to the platform class loader, so
 * neither the application's classes nor the system class path are visible to the agent, and the
 * agent's classes are visible to no one else. Invariants: holds the bytes only of classes not yet
 * defined (each is dropped once defined); offers classes only, no resources.
 */
final class CoreClassLoader extends ClassLoader {
    private final Map<String, byte[]> undefined; // binary class name -> class file; guarded by itself
    private final ProtectionDomain domain;

    private CoreClassLoader(Map<String, byte[]> classes, ProtectionDomain domain) {
        super("stallscope-agent", ClassLoader.getPlatformClassLoader());
        this.undefined = classes;
        this.domain = domain;
    }

    static CoreClassLoader fromJar(InputStream jar, ProtectionDomain domain) throws IOException {
        Map<String, byte[]> classes = new HashMap<>();
        ZipInputStream zip = new ZipInputStream(jar);
        for (ZipEntry entry; (entry = zip.getNextEntry()) != null; ) {
            String name = entry.getName();
            if (name.endsWith(".class") && !name.startsWith("META-INF/")) {
                classes.put(name.substring(0, name.length() - ".class".length()).replace('/', '.'), zip.readAllBytes());
            }
        }
        return new CoreClassLoader(classes, domain);
    }

    @Override
    protected Class<?> findClass(String name) throws ClassNotFoundException {
        byte[] bytes;
        synchronized (undefined) {
            bytes = undefined.remove(name);
        }
        if (bytes == null) {
            throw new ClassNotFoundException(name);
        }
        return defineClass(name, bytes, 0, bytes.length, domain);
    }
}
